/*
 * Raw-syscall attacks run INSIDE the sandbox, for the attempts Python cannot make cleanly:
 * clone() with namespace flags (the child must _exit at once), ioctl with high bits set in
 * the 64-bit command argument (CVE-2019-10063), 32-bit `int 0x80` syscall entries, and a
 * setuid identity report.  Every attempt prints one JSON object on stdout.
 *
 *   rawsys clone-ns     clone(flag|SIGCHLD) for each namespace flag, and plain fork as control
 *   rawsys ioctl-hi     ioctl(-1, TIOCSTI/TIOCLINUX [| high bits]) and TIOCGWINSZ as control
 *   rawsys int80        i386 syscalls through int 0x80, each in a child (SIGSYS is reported)
 *   rawsys ids          real/effective/saved uid and the capability sets (setuid check)
 *   rawsys int80-direct an i386 getpid in the main process (a seccomp kill is the result)
 *
 * Results: {"ret": R} on success, {"errno": "EPERM"} on failure, {"signal": N} when the
 * attempt's child was killed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

static int first = 1;

static void key(const char *name) {
    printf("%s\"%s\": ", first ? "" : ", ", name);
    first = 0;
}

static void result(const char *name, long ret, int err) {
    key(name);
    if (ret < 0)
        printf("{\"errno\": \"%s\"}", strerrorname_np(err) ? strerrorname_np(err) : "E?");
    else
        printf("{\"ret\": %ld}", ret);
}

/* Run fn in a forked child; the child reports through a pipe so a SIGSYS kill is visible. */
static void in_child(const char *name, long (*fn)(long), long arg) {
    int p[2];
    if (pipe(p) != 0) {
        result(name, -1, errno);
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        long r = fn(arg);
        long msg[2] = {r, r < 0 ? errno : 0};
        if (write(p[1], msg, sizeof msg) != sizeof msg)
            _exit(3);
        _exit(0);
    }
    close(p[1]);
    long msg[2] = {0, 0};
    ssize_t n = read(p[0], msg, sizeof msg);
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
        key(name);
        printf("{\"signal\": %d}", WTERMSIG(st));
    } else if (n != sizeof msg) {
        key(name);
        printf("{\"lost\": %zd}", n);
    } else {
        result(name, msg[0], (int)msg[1]);
    }
}

/* clone(flags|SIGCHLD): a created child exits at once; the parent reaps it. */
static long try_clone(long flags) {
    long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return r;
}

static int clone_ns(void) {
    static const struct {
        const char *name;
        long flag;
    } flags[] = {
        {"plain_fork", 0},
        {"CLONE_NEWUSER", CLONE_NEWUSER},
        {"CLONE_NEWNS", CLONE_NEWNS},
        {"CLONE_NEWPID", CLONE_NEWPID},
        {"CLONE_NEWNET", CLONE_NEWNET},
        {"CLONE_NEWIPC", CLONE_NEWIPC},
        {"CLONE_NEWUTS", CLONE_NEWUTS},
        {"CLONE_NEWCGROUP", CLONE_NEWCGROUP},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        in_child(flags[i].name, try_clone, flags[i].flag);
    return 0;
}

static int ioctl_hi(void) {
    static const struct {
        const char *name;
        unsigned long cmd;
    } cmds[] = {
        {"TIOCGWINSZ", TIOCGWINSZ},
        {"TIOCSTI", TIOCSTI},
        {"TIOCSTI_hi1", TIOCSTI | (1UL << 32)},
        {"TIOCSTI_hiall", TIOCSTI | 0xffffffff00000000UL},
        {"TIOCLINUX", TIOCLINUX},
        {"TIOCLINUX_hi1", TIOCLINUX | (1UL << 32)},
        {"TIOCLINUX_hiall", TIOCLINUX | 0xffffffff00000000UL},
    };
    char c = 'X';
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        /* fd -1: the kernel answers EBADF when the filter lets the call through. */
        long r = syscall(SYS_ioctl, -1, cmds[i].cmd, &c);
        result(cmds[i].name, r, errno);
    }
    return 0;
}

/* i386 syscall numbers (arch/x86/entry/syscalls/syscall_32.tbl). */
#define NR32_getpid 20
#define NR32_ptrace 26
#define NR32_socketcall 102
#define NR32_keyctl 288
#define NR32_unshare 310
#define NR32_socket 359

static long int80(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    if (ret < 0 && ret > -4096) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

static uint32_t *low_args;

static long i386_getpid(long unused) { (void)unused; return int80(NR32_getpid, 0, 0, 0); }
static long i386_ptrace(long unused) { (void)unused; return int80(NR32_ptrace, 0, 0, 0); }
static long i386_keyctl(long unused) { (void)unused; return int80(NR32_keyctl, 0, -2, 0); }
static long i386_unshare(long flag) { return int80(NR32_unshare, flag, 0, 0); }
static long i386_socket_netlink(long unused) {
    (void)unused;
    return int80(NR32_socket, 16 /* AF_NETLINK */, 3 /* SOCK_RAW */, 0);
}
static long i386_socketcall_netlink(long unused) {
    (void)unused;
    low_args[0] = 16; /* AF_NETLINK */
    low_args[1] = 3;  /* SOCK_RAW */
    low_args[2] = 0;  /* NETLINK_ROUTE */
    return int80(NR32_socketcall, 1 /* SYS_SOCKET */, (long)(uintptr_t)low_args, 0);
}
static long i386_socketcall_packet(long unused) {
    (void)unused;
    low_args[0] = 17; /* AF_PACKET */
    low_args[1] = 3;  /* SOCK_RAW */
    low_args[2] = 0;
    return int80(NR32_socketcall, 1, (long)(uintptr_t)low_args, 0);
}

static int int80_all(void) {
    /* socketcall takes a pointer the 32-bit entry truncates: keep the arguments below 4 GiB. */
    low_args = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
                    -1, 0);
    if (low_args == MAP_FAILED)
        return 2;
    in_child("i386_getpid", i386_getpid, 0);
    in_child("i386_ptrace_traceme", i386_ptrace, 0);
    in_child("i386_keyctl", i386_keyctl, 0);
    in_child("i386_unshare_newuser", i386_unshare, CLONE_NEWUSER);
    in_child("i386_socket_netlink", i386_socket_netlink, 0);
    in_child("i386_socketcall_netlink", i386_socketcall_netlink, 0);
    in_child("i386_socketcall_packet", i386_socketcall_packet, 0);
    return 0;
}

static int ids(void) {
    uid_t r, e, s;
    getresuid(&r, &e, &s);
    key("ruid"); printf("%u", r);
    key("euid"); printf("%u", e);
    key("suid"); printf("%u", s);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cap", 3) == 0 || strncmp(line, "NoNewPrivs", 10) == 0) {
            char *colon = strchr(line, ':');
            *colon = 0;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            key(line);
            printf("\"%s\"", v);
        }
    }
    if (f)
        fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    printf("GLOVE-PROBE:{");
    int rc = 2;
    if (strcmp(argv[1], "clone-ns") == 0)
        rc = clone_ns();
    else if (strcmp(argv[1], "ioctl-hi") == 0)
        rc = ioctl_hi();
    else if (strcmp(argv[1], "int80") == 0)
        rc = int80_all();
    else if (strcmp(argv[1], "ids") == 0)
        rc = ids();
    else if (strcmp(argv[1], "int80-direct") == 0) {
        fflush(stdout);
        rc = (int)int80(NR32_getpid, 0, 0, 0) < 0 ? 3 : 4; /* a filter kill ends us here */
    }
    printf("}\n");
    return rc;
}
