/*
 * s3conf.c - the AWS CLI's shared files: not yet read.
 */
#include "internal.h"

int rmt_s3_profile(struct rmt_s3 *c, int keys, char *msg, size_t n) {
    (void)c, (void)keys, (void)msg, (void)n;
    return 0;
}
