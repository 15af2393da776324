/* The physical floor of the hook executor: exactly the mount sequence
 * oci-tmpfs-hook carries out for the default plan, with none of its checks.
 * It joins the container's mount namespace by pidfd (state.pid from stdin),
 * makes a tmpfs with fsopen/fsconfig/fsmount and attaches it on ROOTFS/tmp
 * with move_mount, then grows ROOTFS/dev/shm with fspick and
 * FSCONFIG_CMD_RECONFIGURE. Not safe (paths, no openat2): a measurement only.
 * bench/run.sh builds it static:  cc -static -O2 -o mounthook bench/mounthook.c
 * Usage (a prestart hook):  mounthook ROOTFS TMP_BYTES SHM_BYTES
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char state[1 << 16];

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
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

    char path[4096];
    int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", argv[2], 0) < 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "1777", 0) < 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return 1;
    int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    snprintf(path, sizeof path, "%s/tmp", argv[1]);
    if (mnt < 0 || syscall(SYS_move_mount, mnt, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return 1;

    snprintf(path, sizeof path, "%s/dev/shm", argv[1]);
    int shm = (int)syscall(SYS_fspick, AT_FDCWD, path, FSPICK_CLOEXEC);
    if (shm < 0 || syscall(SYS_fsconfig, shm, FSCONFIG_SET_STRING, "size", argv[3], 0) < 0 ||
        syscall(SYS_fsconfig, shm, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0)
        return 1;
    return 0;
}
