/*
 * chatdump - llama.cpp's own rendering of a chat template, for
 * tests/mount_tokenizer.py (issue 26: hf/tokenizer_config.json's
 * chat_template rendered by @huggingface/jinja must give the same text).
 *
 *   chatdump LIBLLAMA TEMPLATE_FILE
 *
 * dlopens libllama (node-llama-cpp's, $GGUFS_SRCDIR/.deps) and prints
 * llama_chat_apply_template(template, the messages below, add_ass true):
 * llama.cpp recognizes the template among its built-in ones by its text.
 * Exit 0; 77 when the library cannot be loaded; 3 when llama.cpp cannot
 * render the template; 2 on other failures.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct llama_chat_message {
    const char *role, *content;
};
typedef int32_t (*apply_fn)(const char *tmpl,
                            const struct llama_chat_message *chat,
                            size_t n_msg, bool add_ass, char *buf,
                            int32_t length);

/* The conversation; tests/chat_render.mjs has the same. */
static const struct llama_chat_message msgs[] = {
    {"system", "You are terse."},
    {"user", "Hello, \"world\" \\ caf\xc3\xa9 \xf0\x9f\x98\x80\nline two"},
    {"assistant", "Hi."},
    {"user", "Again?"},
};

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: chatdump LIBLLAMA TEMPLATE_FILE\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    apply_fn apply = h ? (apply_fn)dlsym(h, "llama_chat_apply_template") : NULL;
    if (!apply) {
        fprintf(stderr, "chatdump: %s\n", dlerror());
        return 77;
    }
    FILE *f = fopen(argv[2], "rb");
    static char tmpl[1 << 20], out[1 << 20];
    size_t n = f ? fread(tmpl, 1, sizeof tmpl - 1, f) : 0;
    if (!f || ferror(f)) {
        perror(argv[2]);
        return 2;
    }
    fclose(f);
    tmpl[n] = '\0';
    int32_t r = apply(tmpl, msgs, sizeof msgs / sizeof *msgs, true, out,
                      (int32_t)sizeof out);
    if (r < 0) {
        fprintf(stderr, "chatdump: llama.cpp cannot render this template\n");
        return 3;
    }
    if (r >= (int32_t)sizeof out)
        return 2;
    fwrite(out, 1, (size_t)r, stdout);
    return 0;
}
