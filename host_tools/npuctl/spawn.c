/* SPDX-License-Identifier: MIT */
/*
 * npuctl child processes: start a program with posix_spawn and wait for it without polling
 * and without a signal handler.
 *
 * SIGCHLD, SIGINT, SIGTERM and SIGHUP are blocked before the child starts and collected with
 * sigtimedwait() against a CLOCK_MONOTONIC deadline, so the wait sleeps until the child
 * changes state, a signal arrives for npuctl, or the timeout expires. A child in its own
 * process group (QEMU) does not see the terminal's Ctrl-C, so npuctl forwards SIGINT, SIGTERM
 * and SIGHUP to the group (a third one escalates to SIGKILL); on timeout the whole group is
 * killed with SIGKILL, wrapper scripts and their children included.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "npu_enums.h"

extern char **environ;

static void wait_signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

static int start_child(const struct npuctl_spawn *sp, const sigset_t *child_mask, pid_t *pid,
                       char *err, size_t errlen)
{
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&fa);
    short flags = POSIX_SPAWN_SETSIGMASK;
    posix_spawnattr_setsigmask(&attr, child_mask);
    if (sp->own_group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&attr, 0);
    }
    posix_spawnattr_setflags(&attr, flags);
    if (sp->stdin_null)
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (sp->stdout_path)
        posix_spawn_file_actions_addopen(&fa, 1, sp->stdout_path, O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
    if (sp->stdout_path && sp->stderr_too)
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = sp->search_path
                 ? posix_spawnp(pid, sp->argv[0], &fa, &attr, sp->argv, environ)
                 : posix_spawn(pid, sp->argv[0], &fa, &attr, sp->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        snprintf(err, errlen, "cannot run '%s': %s", sp->argv[0], strerror(rc));
        return NPU_ERR_IO;
    }
    return NPU_OK;
}

static void set_exit(int st, struct npuctl_child_exit *ex)
{
    ex->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    ex->status = WIFEXITED(st) ? WEXITSTATUS(st) : ex->signal ? 128 + ex->signal : 255;
}

/* Time left until deadline; false once it has passed. */
static bool time_left(const struct timespec *deadline, struct timespec *left)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    left->tv_sec = deadline->tv_sec - now.tv_sec;
    left->tv_nsec = deadline->tv_nsec - now.tv_nsec;
    if (left->tv_nsec < 0) {
        left->tv_nsec += 1000000000L;
        left->tv_sec--;
    }
    return left->tv_sec > 0 || (left->tv_sec == 0 && left->tv_nsec > 0);
}

/* Sends a signal npuctl received on to the child's group. */
static void forward_signal(const struct npuctl_spawn *sp, pid_t pid, int sig, int *forwarded)
{
    if (!sp->own_group)
        return; /* same group: the terminal already delivered it to the child */
    ++*forwarded;
    kill(-pid, *forwarded >= 3 ? SIGKILL : sig);
}

static int kill_on_timeout(const struct npuctl_spawn *sp, pid_t pid,
                           struct npuctl_child_exit *ex)
{
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) { /* exited just as the time ran out */
        set_exit(st, ex);
        return NPU_OK;
    }
    kill(sp->own_group ? -pid : pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    set_exit(st, ex);
    return NPU_ERR_TIMEOUT;
}

static int wait_child(const struct npuctl_spawn *sp, pid_t pid, const sigset_t *set,
                      struct npuctl_child_exit *ex, char *err, size_t errlen)
{
    struct timespec deadline, left;
    int forwarded = 0;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += sp->timeout_s;
    for (;;) {
        int sig, st;
        if (sp->timeout_s && !time_left(&deadline, &left))
            return kill_on_timeout(sp, pid, ex);
        if (sp->tick && (!sp->timeout_s || left.tv_sec >= 1)) /* wake once a second */
            left = (struct timespec){ 1, 0 };
        sig = sp->timeout_s || sp->tick ? sigtimedwait(set, NULL, &left)
                                        : sigwaitinfo(set, NULL);
        const int wait_errno = errno; /* the tick may change errno */
        if (sig < 0 && wait_errno == EAGAIN && sp->tick)
            sp->tick(sp->tick_ctx);
        if (sig < 0 && (wait_errno == EAGAIN || wait_errno == EINTR))
            continue; /* the deadline is checked at the top */
        if (sig < 0) {
            snprintf(err, errlen, "waiting for '%s': %s", sp->argv[0], strerror(wait_errno));
            kill(sp->own_group ? -pid : pid, SIGKILL);
            waitpid(pid, &st, 0);
            return NPU_ERR_IO;
        }
        if (sig != SIGCHLD) {
            forward_signal(sp, pid, sig, &forwarded);
            continue;
        }
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            set_exit(st, ex);
            return NPU_OK;
        }
    }
}

/* The signals a wait collects, blocked (the old mask and SIGCHLD action kept): an
   inherited SIG_IGN for SIGCHLD would reap the child behind waitpid's back. */
static void signals_take(sigset_t *set, sigset_t *old_mask, struct sigaction *old_chld)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, old_chld);
    wait_signal_set(set);
    sigprocmask(SIG_BLOCK, set, old_mask);
}

/* Drops a SIGCHLD still pending, then restores the mask and the action: the others are
   delivered as usual once unblocked. */
static void signals_give(const sigset_t *old_mask, const struct sigaction *old_chld)
{
    sigset_t chld;
    struct timespec zero = { 0, 0 };
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    while (sigtimedwait(&chld, NULL, &zero) == SIGCHLD)
        ;
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    sigaction(SIGCHLD, old_chld, NULL);
}

int npuctl_spawn_wait(const struct npuctl_spawn *sp, struct npuctl_child_exit *ex, char *err,
                      size_t errlen)
{
    sigset_t set, old_mask;
    struct sigaction old_chld;
    signals_take(&set, &old_mask, &old_chld);
    fflush(NULL);
    pid_t pid;
    int rc = start_child(sp, &old_mask, &pid, err, errlen);
    if (rc == NPU_OK)
        rc = wait_child(sp, pid, &set, ex, err, errlen);
    signals_give(&old_mask, &old_chld);
    return rc;
}

/* ---- a pool of children (npuctl sweep) */

struct pool_child {
    pid_t pid;
    size_t i;
};

/* Reaps every ended child of the pool, telling `ended`; returns how many are left. */
static unsigned pool_reap(struct pool_child *run, unsigned nrun,
                          void (*ended)(void *, size_t, const struct npuctl_child_exit *),
                          void *ctx)
{
    for (unsigned k = 0; k < nrun;) {
        int st;
        if (waitpid(run[k].pid, &st, WNOHANG) != run[k].pid) {
            k++;
            continue;
        }
        struct npuctl_child_exit ex;
        set_exit(st, &ex);
        ended(ctx, run[k].i, &ex);
        run[k] = run[--nrun];
    }
    return nrun;
}

/* Starts child i into *slot: 1, or 0 when it was skipped or could not start (told). */
static unsigned pool_start(size_t i, const sigset_t *child_mask,
                           bool (*start)(void *, size_t, struct npuctl_spawn *),
                           void (*ended)(void *, size_t, const struct npuctl_child_exit *),
                           void *ctx, struct pool_child *slot)
{
    struct npuctl_spawn sp = { 0 };
    if (!start(ctx, i, &sp))
        return 0;
    sp.own_group = true;
    char err[NPUCTL_ERR_MAX];
    fflush(NULL);
    if (start_child(&sp, child_mask, &slot->pid, err, sizeof(err)) != NPU_OK) {
        npuctl_print_error("%s", err);
        ended(ctx, i, &(struct npuctl_child_exit){ .status = 127 });
        return 0;
    }
    slot->i = i;
    return 1;
}

int npuctl_spawn_pool(size_t n, unsigned jobs,
                      bool (*start)(void *ctx, size_t i, struct npuctl_spawn *sp),
                      void (*ended)(void *ctx, size_t i, const struct npuctl_child_exit *ex),
                      void *ctx)
{
    struct pool_child *run = calloc(jobs ? jobs : 1, sizeof(*run));
    sigset_t set, old_mask;
    struct sigaction old_chld;
    signals_take(&set, &old_mask, &old_chld);
    unsigned nrun = 0;
    int stop = 0;
    size_t next = 0;
    while (run && (nrun > 0 || (!stop && next < n))) {
        while (!stop && next < n && nrun < jobs)
            nrun += pool_start(next++, &old_mask, start, ended, ctx, &run[nrun]);
        if (nrun == 0)
            continue;
        const int sig = sigwaitinfo(&set, NULL);
        if (sig > 0 && sig != SIGCHLD) { /* each child escalates its own children: a
                                             SIGKILL here would orphan a serve's QEMU */
            stop = stop ? stop : sig;
            for (unsigned k = 0; k < nrun; k++)
                kill(-run[k].pid, sig);
        }
        nrun = pool_reap(run, nrun, ended, ctx);
    }
    signals_give(&old_mask, &old_chld);
    const bool none = run == NULL; /* out of memory: nothing was started */
    free(run);
    return none ? SIGKILL : stop;
}
