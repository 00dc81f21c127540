/*
 * status.h - the exit statuses of the ggufs command, one enum shared by
 * the command line (cli/) and the daemon (fs/, whose mount and serve
 * return one).  man/ggufs.1, EXIT STATUS, is the contract; tests/cli.py
 * checks it.
 *
 *   0 success;
 *   1 the GGUF cannot be used (unreadable, invalid, unsupported, locked by
 *     another mount, missing for --recover; a command refused);
 *   2 usage error (found before anything is opened: unknown options, bad
 *     numbers, missing or extra arguments);
 *   3 the mount itself failed, or -u could not unmount;
 *   4 a commit failed (the edits were saved beside the GGUF), or -u of a
 *     mount whose daemon had died;
 *   5 ggufs -u committed, but files in meta/ were not (FILEs, not keys):
 *     the report names them (issue 21);
 *   6 ggufs -u committed, but the mount stays: a program holds a file or
 *     directory of it open (EBUSY); the message says how to find it
 *     (fuser -m) and that the edits are in (issue 32).
 */
#ifndef GGUFS_STATUS_H
#define GGUFS_STATUS_H

enum gfs_exit {
    EXIT_BADFILE = 1,
    EXIT_USAGE = 2,
    EXIT_MOUNT = 3,
    EXIT_COMMIT = 4,
    EXIT_UNCOMMITTED = 5,
    EXIT_BUSY = 6
};

#endif
