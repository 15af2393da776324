/* A measurement only, never the product: an overlay over the container's
 * HOME, for bench/home_copy.sh (docs/design.md#home-copy). Not safe (it
 * follows paths and symlinks of the image, no openat2): a floor to time, and
 * a probe of what this kernel allows.
 *
 * The overlay is built by fd with the new mount API: the lower layer is the
 * image's directory itself (an fd opened before anything is mounted over
 * it), the upper and work dirs are on a detached tmpfs that is never
 * attached anywhere, and the overlay is attached over the directory with
 * move_mount. The upper dir gets the lower dir's mode and owner, so HOME
 * looks as the image made it.
 *
 *   ovlhook hook ROOTFS REL SIZE   a prestart hook: state.pid from stdin,
 *                                  setns(CLONE_NEWNS) by pidfd, overlay on
 *                                  ROOTFS/REL (runc's prestart: the rootfs is
 *                                  still at its host path)
 *   ovlhook try DIR SIZE [KIND]    in the current mount namespace, verbose:
 *                                  KIND = opath (the default: O_PATH fds),
 *                                  rdonly (O_RDONLY fds), string (paths), or
 *                                  redirect (O_PATH fds and redirect_dir=on)
 *
 * Build: cc -static -O2 -o ovlhook bench/ovlhook.c (bench/home_copy.sh does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int verbose;

static void say(const char *step, long rc, int ctx) {
    if (!verbose)
        return;
    fprintf(stderr, "ovlhook: %-40s %s\n", step, rc < 0 ? strerror(errno) : "ok");
    if (rc < 0 && ctx >= 0) {
        /* The fs context's own messages ("e overlay: ..."). */
        char msg[512];
        ssize_t n;
        while ((n = read(ctx, msg, sizeof msg - 1)) > 0) {
            msg[n] = 0;
            fprintf(stderr, "ovlhook:   kernel: %s\n", msg);
        }
    }
}

#define TRY(step, expr, ctx)                                                                       \
    do {                                                                                           \
        long rc_ = (long)(expr);                                                                   \
        say(step, rc_, ctx);                                                                       \
        if (rc_ < 0)                                                                               \
            return 1;                                                                              \
    } while (0)

static int layer(int ov, const char *key, int fd, const char *kind) {
    if (strcmp(kind, "string") == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        char skey[32];
        snprintf(skey, sizeof skey, "%s", key);
        size_t n = strlen(skey);
        if (n && skey[n - 1] == '+')
            skey[n - 1] = 0; /* lowerdir, upperdir, workdir as mount(8) writes them */
        return (int)syscall(SYS_fsconfig, ov, FSCONFIG_SET_STRING, skey, path, 0);
    }
    return (int)syscall(SYS_fsconfig, ov, FSCONFIG_SET_FD, key, NULL, fd);
}

static int overlay(const char *dir, const char *size, const char *kind) {
    int oflag = strcmp(kind, "rdonly") == 0 || strcmp(kind, "string") == 0 ? O_RDONLY : O_PATH;
    int lower = open(dir, oflag | O_DIRECTORY | O_CLOEXEC);
    TRY("open lower", lower, -1);
    struct stat st;
    TRY("fstat lower", fstat(lower, &st), -1);

    int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    TRY("fsopen tmpfs", fs, -1);
    TRY("fsconfig tmpfs size", syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", size, 0), fs);
    TRY("fsconfig tmpfs mode", syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0700", 0), fs);
    TRY("fsconfig tmpfs create", syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0), fs);
    int tm = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    TRY("fsmount tmpfs (detached)", tm, fs);
    TRY("mkdir upper", mkdirat(tm, "u", st.st_mode & 07777), -1);
    TRY("chown upper", fchownat(tm, "u", st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW), -1);
    TRY("chmod upper", fchmodat(tm, "u", st.st_mode & 07777, 0), -1);
    TRY("mkdir work", mkdirat(tm, "w", 0700), -1);
    int upper = openat(tm, "u", oflag | O_DIRECTORY | O_CLOEXEC);
    TRY("open upper", upper, -1);
    int work = openat(tm, "w", oflag | O_DIRECTORY | O_CLOEXEC);
    TRY("open work", work, -1);

    int ov = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
    TRY("fsopen overlay", ov, -1);
    TRY(strcmp(kind, "string") ? "fsconfig lowerdir+ (fd)" : "fsconfig lowerdir (path)",
        layer(ov, "lowerdir+", lower, kind), ov);
    TRY(strcmp(kind, "string") ? "fsconfig upperdir (fd)" : "fsconfig upperdir (path)",
        layer(ov, "upperdir", upper, kind), ov);
    TRY(strcmp(kind, "string") ? "fsconfig workdir (fd)" : "fsconfig workdir (path)",
        layer(ov, "workdir", work, kind), ov);
    if (strcmp(kind, "redirect") == 0)
        TRY("fsconfig redirect_dir=on",
            syscall(SYS_fsconfig, ov, FSCONFIG_SET_STRING, "redirect_dir", "on", 0), ov);
    TRY("fsconfig overlay create", syscall(SYS_fsconfig, ov, FSCONFIG_CMD_CREATE, NULL, NULL, 0), ov);
    int om = (int)syscall(SYS_fsmount, ov, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    TRY("fsmount overlay", om, ov);
    TRY("move_mount overlay onto the dir",
        syscall(SYS_move_mount, om, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH), -1);
    return 0;
}

static char state[1 << 16];

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "try") == 0) {
        verbose = 1;
        return overlay(argv[2], argv[3], argc > 4 ? argv[4] : "opath");
    }
    if (argc != 5 || strcmp(argv[1], "hook") != 0) {
        fprintf(stderr, "usage: ovlhook hook ROOTFS REL SIZE | ovlhook try DIR SIZE [opath|rdonly|string|redirect]\n");
        return 2;
    }
    size_t len = 0;
    ssize_t n;
    while (len < sizeof state - 1 && (n = read(0, state + len, sizeof state - 1 - len)) > 0)
        len += (size_t)n;
    state[len] = 0;
    char *pid = strstr(state, "\"pid\":");
    if (!pid)
        return 1;
    int pidfd = (int)syscall(SYS_pidfd_open, atoi(pid + 6), 0);
    if (pidfd < 0 || setns(pidfd, CLONE_NEWNS) < 0)
        return 1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", argv[2], argv[3]);
    if (overlay(dir, argv[4], "opath") != 0) {
        perror("ovlhook");
        return 1;
    }
    return 0;
}
