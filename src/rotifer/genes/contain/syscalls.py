"""The system calls a contained gene may make: one table, per architecture.

A contained child (a Python gene's process forked by the fork server, or
``node`` started for a Node gene) runs under a seccomp filter built from this
table (:mod:`.seccomp`): a call in :data:`GROUPS` is allowed, a call in
:data:`ARGUMENT_RULES` is allowed only with the arguments written there, and
**every other call fails with EPERM** -- an allowlist, as Docker's default
profile and Chromium's and Firefox's sandboxes are, so a call the kernel adds
next year is refused until someone writes it here.

Each entry is ``(name, x86_64 number, aarch64 number)``; ``None``: the
architecture has no such call (aarch64 has none of the old path calls such as
``open`` or ``stat``: its C library uses the ``*at`` ones).  The numbers are
the kernel's (``asm/unistd_64.h``, ``asm-generic/unistd.h``); those from 403
on are the same on every architecture.

What CPython and Node need was found by running real genes (Python genes with
threads and memory calls, Node and TypeScript genes, the containment, node and
agents test suites) under a filter that logged every refusal.

What is deliberately *not* here (EPERM), by the harm it would do:

- file metadata, which Landlock does not govern: ``chmod``/``fchmod*``,
  ``chown``/``fchown*``/``lchown``, ``utime``/``utimes``/``utimensat``/``futimesat``,
  the whole xattr family (a gene could make a setuid copy of a runtime, or
  lock a user out of the store with ``chmod 000``);
- watching other files: ``fanotify_*`` (a permission mark can hang rotifer in
  the kernel), ``inotify_*``;
- channels that outlive the run: SysV IPC (``msg*``, ``sem*``, ``shm*``), POSIX
  message queues (``mq_*``), ``memfd_create`` and ``memfd_secret`` (memory no
  rlimit counts), ``socketpair``, ``listen``, ``accept*``;
- the machine's state: ``syslog``, ``acct``, ``settimeofday``, ``clock_settime``,
  ``clock_adjtime``, ``adjtimex``, ``sethostname``, ``setdomainname``,
  ``reboot``, ``swapon``/``swapoff``, ``sync``/``syncfs``, ``quotactl``, the module and
  kexec calls, ``iopl``/``ioperm``;
- scheduling and memory beyond the process: ``sched_setscheduler``,
  ``sched_setparam``, ``sched_setattr`` (real-time), ``ioprio_*``,
  ``mlock*``, ``mbind``, ``set_mempolicy``, ``migrate_pages``, ``move_pages``;
- other processes: ``ptrace``, ``process_vm_*``, ``process_madvise``,
  ``pidfd_*``, ``kcmp``, ``fork``/``vfork``;
- the kernel's larger surfaces: ``bpf``, ``perf_event_open``, ``io_uring_*``,
  ``userfaultfd``, ``keyctl``/``add_key``/``request_key``, the AIO calls,
  ``seccomp``, ``landlock_*``, ``lsm_*``;
- changing identity or the view of the system: ``set*uid``/``set*gid``,
  ``setgroups``, ``capset``, ``setsid``/``setpgid``, ``personality``, ``mount`` and
  the new mount API, ``umount2``, ``pivot_root``, ``chroot``, ``unshare``,
  ``setns``, ``name_to_handle_at``/``open_by_handle_at``, ``vhangup``.
"""

from __future__ import annotations

#: The machines this table covers, by ``platform.machine()``, with the
#: ``AUDIT_ARCH_*`` value a filter compares (any other architecture's call kills).
ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

Entry = tuple[str, int | None, int | None]


class Group:
    """Calls allowed with any arguments, and why a gene needs them.  (A plain
    class: a dataclass costs the fork server ~3.5 M instructions to create.)"""

    __slots__ = ("calls", "name", "why")

    def __init__(self, name: str, why: str, calls: tuple[Entry, ...]) -> None:
        self.name, self.why, self.calls = name, why, calls


GROUPS: tuple[Group, ...] = (
    Group("memory", "the process's own memory: heap, mappings (mmap itself is in "
          "ARGUMENT_RULES), protection keys V8's JIT uses, mseal and the shadow stack "
          "the C library may set up", (
        ("brk", 12, 214), ("munmap", 11, 215), ("mremap", 25, 216),
        ("mprotect", 10, 226), ("madvise", 28, 233), ("msync", 26, 227), ("mincore", 27, 232),
        ("membarrier", 324, 283), ("pkey_alloc", 330, 289), ("pkey_free", 331, 290),
        ("pkey_mprotect", 329, 288), ("get_mempolicy", 239, 236), ("mseal", 462, 462),
        ("map_shadow_stack", 453, None),
    )),
    Group("files", "files and descriptors; Landlock decides which paths a call may reach "
          "(read the runtime and the gene's folder, write the private temporary folder, "
          "devices only /dev/null; ioctl on a device is Landlock's too, ABI 5)", (
        ("read", 0, 63), ("write", 1, 64), ("pread64", 17, 67), ("pwrite64", 18, 68),
        ("readv", 19, 65), ("writev", 20, 66), ("preadv", 295, 69), ("pwritev", 296, 70),
        ("preadv2", 327, 286), ("pwritev2", 328, 287), ("open", 2, None), ("openat", 257, 56),
        ("openat2", 437, 437), ("creat", 85, None), ("close", 3, 57),
        ("close_range", 436, 436), ("lseek", 8, 62), ("stat", 4, None), ("fstat", 5, 80),
        ("lstat", 6, None), ("newfstatat", 262, 79), ("statx", 332, 291), ("statfs", 137, 43),
        ("fstatfs", 138, 44), ("access", 21, None), ("faccessat", 269, 48),
        ("faccessat2", 439, 439), ("readlink", 89, None), ("readlinkat", 267, 78),
        ("getdents", 78, None), ("getdents64", 217, 61), ("getcwd", 79, 17), ("chdir", 80, 49),
        ("fchdir", 81, 50), ("mkdir", 83, None), ("mkdirat", 258, 34), ("mknod", 133, None),
        ("mknodat", 259, 33), ("rmdir", 84, None), ("unlink", 87, None), ("unlinkat", 263, 35),
        ("rename", 82, None), ("renameat", 264, 38), ("renameat2", 316, 276),
        ("link", 86, None), ("linkat", 265, 37), ("symlink", 88, None), ("symlinkat", 266, 36),
        ("truncate", 76, 45), ("ftruncate", 77, 46), ("fallocate", 285, 47), ("fsync", 74, 82),
        ("fdatasync", 75, 83), ("fadvise64", 221, 223), ("readahead", 187, 213),
        ("dup", 32, 23), ("dup2", 33, None), ("dup3", 292, 24), ("fcntl", 72, 25),
        ("flock", 73, 32), ("pipe", 22, None), ("pipe2", 293, 59), ("ioctl", 16, 29),
        ("sendfile", 40, 71), ("copy_file_range", 326, 285), ("splice", 275, 76),
        ("tee", 276, 77), ("vmsplice", 278, 75), ("umask", 95, 166),
    )),
    Group("wait", "waiting and events inside the process: epoll, poll, timers, futexes, "
          "restartable sequences", (
        ("epoll_create", 213, None), ("epoll_create1", 291, 20), ("epoll_ctl", 233, 21),
        ("epoll_wait", 232, None), ("epoll_pwait", 281, 22), ("epoll_pwait2", 441, 441),
        ("poll", 7, None), ("ppoll", 271, 73), ("select", 23, None), ("pselect6", 270, 72),
        ("eventfd", 284, None), ("eventfd2", 290, 19), ("timerfd_create", 283, 85),
        ("timerfd_settime", 286, 86), ("timerfd_gettime", 287, 87), ("nanosleep", 35, 101),
        ("clock_nanosleep", 230, 115), ("futex", 202, 98), ("futex_waitv", 449, 449),
        ("futex_wake", 454, 454), ("futex_wait", 455, 455), ("futex_requeue", 456, 456),
        ("set_robust_list", 273, 99), ("get_robust_list", 274, 100), ("rseq", 334, 293),
        ("pause", 34, None), ("restart_syscall", 219, 128),
    )),
    Group("time", "reading the clocks and the process's own timers (never setting a clock)", (
        ("clock_gettime", 228, 113), ("clock_getres", 229, 114), ("gettimeofday", 96, 169),
        ("time", 201, None), ("times", 100, 153), ("getitimer", 36, 102),
        ("setitimer", 38, 103), ("alarm", 37, None), ("timer_create", 222, 107),
        ("timer_settime", 223, 110), ("timer_gettime", 224, 108),
        ("timer_getoverrun", 225, 109), ("timer_delete", 226, 111),
    )),
    Group("identity", "read-only questions about the process itself and the machine "
          "(sched_getaffinity: the C library asks it of a thread by its id)", (
        ("getpid", 39, 172), ("getppid", 110, 173), ("gettid", 186, 178), ("getuid", 102, 174),
        ("geteuid", 107, 175), ("getgid", 104, 176), ("getegid", 108, 177),
        ("getresuid", 118, 148), ("getresgid", 120, 150), ("getgroups", 115, 158),
        ("getpgid", 121, 155), ("getpgrp", 111, None), ("getsid", 124, 156),
        ("uname", 63, 160), ("sysinfo", 99, 179), ("getrusage", 98, 165), ("getcpu", 309, 168),
        ("capget", 125, 90), ("getrandom", 318, 278), ("getpriority", 140, 141),
        ("sched_getaffinity", 204, 123), ("sched_yield", 24, 124),
        ("sched_get_priority_max", 146, 125),
        ("sched_get_priority_min", 147, 126),
    )),
    Group("signals", "signal handling; sending one is scoped by Landlock (ABI 6) to the "
          "gene's own domain: a filter cannot know the gene's pids", (
        ("rt_sigaction", 13, 134), ("rt_sigprocmask", 14, 135), ("rt_sigreturn", 15, 139),
        ("rt_sigpending", 127, 136), ("rt_sigtimedwait", 128, 137),
        ("rt_sigsuspend", 130, 133), ("sigaltstack", 131, 132), ("kill", 62, 129),
        ("tgkill", 234, 131), ("tkill", 200, 130),
    )),
    Group("process", "the process's own life: exit, its own rlimits (setrlimit acts on the "
          "caller only), execve (a Node child is confined before exec: the filter and "
          "Landlock stay across it), wait4/waitid (no child can exist: no fork)", (
        ("exit", 60, 93), ("exit_group", 231, 94), ("set_tid_address", 218, 96),
        ("arch_prctl", 158, None), ("execve", 59, 221), ("execveat", 322, 281),
        ("wait4", 61, 260), ("waitid", 247, 95), ("getrlimit", 97, 163),
        ("setrlimit", 160, 164),
    )),
    Group("sockets", "calls on a socket the gene holds: it can hold one only with "
          "--allow-tcp (socket is in ARGUMENT_RULES) and Landlock decides the ports", (
        ("connect", 42, 203), ("bind", 49, 200), ("getsockname", 51, 204),
        ("getpeername", 52, 205), ("setsockopt", 54, 208), ("getsockopt", 55, 209),
        ("recvfrom", 45, 207), ("recvmsg", 47, 212), ("shutdown", 48, 210),
    )),
)

#: Calls allowed only with some arguments (:mod:`.seccomp` writes the checks),
#: and what is checked.  "pid 0" is the calling process: a gene may change its
#: own limits, priority and CPUs, never rotifer's, the fork server's or
#: another gene's (Docker's profile allows these calls on any pid of the
#: user; rotifer's genes run as their own user when rotifer is root, and this
#: holds for an ordinary user too).
ARGUMENT_RULES: dict[str, tuple[int | None, int | None, str]] = {
    "mmap": (9, 222, "no MAP_SHARED|MAP_ANONYMOUS: shared anonymous memory is counted by "
                     "no rlimit (RLIMIT_DATA counts private mappings only)"),
    "clone": (56, 220, "CLONE_THREAD set (a thread, never a process) and no CLONE_NEW* flag"),
    "clone3": (435, 435, "ENOSYS: its flags sit in memory a filter cannot read; the C "
                         "library falls back to clone"),
    "socket": (41, 198, "never; with --allow-tcp: AF_INET or AF_INET6, SOCK_STREAM, protocol 0 "
                        "or IPPROTO_TCP (not IPPROTO_MPTCP, whose subflows Landlock's port "
                        "rules do not see)"),
    "sendto": (44, 206, "no MSG_FASTOPEN (a connect that would not pass Landlock's hook)"),
    "sendmsg": (46, 211, "no MSG_FASTOPEN"),
    "prlimit64": (302, 261, "pid 0"),
    "setpriority": (141, 140, "PRIO_PROCESS and who 0"),
    "sched_setaffinity": (203, 122, "pid 0"),
    "sched_getparam": (143, 121, "pid 0"),
    "sched_getscheduler": (145, 120, "pid 0"),
    "sched_getattr": (315, 275, "pid 0"),
    "prctl": (157, 167, "only the options in seccomp.PRCTL_OPTIONS (thread names, reading "
                        "the process's own state)"),
}


def allowed(machine: str) -> dict[str, int]:
    """The calls allowed with any arguments on ``machine``, by name."""
    x86 = machine == "x86_64"
    out: dict[str, int] = {}
    for group in GROUPS:
        for name, x86_64, aarch64 in group.calls:
            number = x86_64 if x86 else aarch64
            if number is not None:
                out[name] = number
    return out


def filtered(machine: str) -> dict[str, int]:
    """The calls of :data:`ARGUMENT_RULES` on ``machine``, by name."""
    x86 = machine == "x86_64"
    out: dict[str, int] = {}
    for name, (x86_64, aarch64, _) in ARGUMENT_RULES.items():
        number = x86_64 if x86 else aarch64
        if number is not None:
            out[name] = number
    return out
