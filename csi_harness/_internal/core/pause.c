/*
 * The pod sandbox process for the local cluster's pause image.
 *
 * It holds the pod's namespaces open and does nothing else: it sleeps in
 * pause(2), exits 0 on SIGINT or SIGTERM, and reaps any child that is
 * re-parented to it (it is PID 1 of the pod when the PID namespace is shared).
 *
 * Built by csi_harness/_internal/core/images.py with `gcc -static -Os`; no registry needed.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_terminate(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int handle(int sig, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;
    if (sig == SIGCHLD) {
        action.sa_flags |= SA_NOCLDSTOP;
    }
    sigemptyset(&action.sa_mask);
    return sigaction(sig, &action, NULL);
}

static void say(const char *text) {
    ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
    (void)ignored;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        say("csi-mock pause\n");
        return 0;
    }
    if (handle(SIGINT, on_terminate) != 0 || handle(SIGTERM, on_terminate) != 0 ||
        handle(SIGCHLD, on_child) != 0) {
        say("pause: sigaction failed\n");
        return 1;
    }
    for (;;) {
        pause();
    }
}
