"""Containing Python and Node genes: each runs in a child process confined by
the kernel (Landlock, seccomp, rlimits) before any of its code runs, and
reaches the agent's memory only through the pipes its parent opened for it.

- :mod:`rotifer.genes.contain.kernel`      -- Landlock, rlimits, the order of confinement
- :mod:`rotifer.genes.contain.syscalls`    -- the seccomp allowlist, per architecture, with reasons
- :mod:`rotifer.genes.contain.seccomp`     -- ... built into a BPF program
- :mod:`rotifer.genes.contain.privileges`  -- no capability; as root, the genes' own user
- :mod:`rotifer.genes.contain.sandbox`     -- what a child may touch; fail closed; :class:`Grant`
- :mod:`rotifer.genes.contain.exposure`    -- no project under a folder genes may read
- :mod:`rotifer.genes.contain.doctor`      -- what this machine enforces, probed in a real child
- :mod:`rotifer.genes.contain.channel`     -- the parent's end of the pipes, the deadline
- :mod:`rotifer.genes.contain.protocol`    -- ... and what a child may say on them (an allowlist)
- :mod:`rotifer.genes.contain.python_host` -- a contained Python gene, parent side
- :mod:`rotifer.genes.contain.forkserver`  -- ... the fork server it gets its child from
- :mod:`rotifer.genes.contain.zygote`      -- ... that server's process, which forks and confines it
- :mod:`rotifer.genes.contain.pychild`     -- ... and the child, which runs the gene

See docs/reliability.md ("Containing genes") for the threat model.
"""
