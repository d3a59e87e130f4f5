"""``rotifer doctor`` tells the truth (issue 30): the user genes run as, what a
real confined child holds, each promise enforced here or not -- as root and as
an ordinary user, whose answers differ -- and a non-zero exit when genes
cannot run contained (tests/containment/test_hostile.py: a kernel without
Landlock)."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import (
    add_gene,
    clean_env,
    init_project,
    last_line,
    ok_process,
    refused_process,
    rotifer_command,
)
from tests.containment.test_hostile_unprivileged import nobody_dir  # noqa: F401

#: What only a root rotifer can enforce (an ordinary user shares RLIMIT_NPROC
#: with every process of the user).
ROOT_ONLY = ("threads and processes capped",)
#: What an ordinary user's genes get only in a user namespace of their own
#: (contain/view.py), where the kernel allows one: the bounding set and
#: securebits, a tmpfs, a root and network of their own.
IN_A_USER_NAMESPACE = ("bounding set empty, securebits locked",
                       "temporary folder capped in total", "no stat of paths outside",
                       "/proc shows the gene's own network")


def rows(out: str) -> dict[str, str]:
    found = {}
    for line in out.splitlines():
        for what in (*ROOT_ONLY, *IN_A_USER_NAMESPACE, "no capability", "genes never run as root",
                     "no chmod/chown/utime/xattr"):
            if line.startswith(what):
                found[what] = "yes" if "  yes  " in line else "no"
    return found


def test_doctor_as_this_user(tmp_path: Path) -> None:
    out = ok_process(tmp_path, "doctor")
    found = rows(out)
    assert found["no capability"] == "yes" and found["genes never run as root"] == "yes", out
    assert found["no chmod/chown/utime/xattr"] == "yes", out
    assert "capabilities effective 0x0, permitted 0x0, inheritable 0x0, ambient 0" in out
    if os.geteuid() == 0:
        assert "Genes run as: nobody (uid 65534" in out
        assert "uid 65534, gid 65534, groups none" in out
        assert all(found[w] == "yes" for w in (*ROOT_ONLY, *IN_A_USER_NAMESPACE)), out
        assert "bounding set 0 of" in out and "securebits 0xef" in out
        assert out.rstrip().endswith("Python and Node genes run contained.")


def test_doctor_as_an_unprivileged_user(
        nobody_dir: tuple[Path, pwd.struct_passwd]) -> None:  # noqa: F811
    base, user = nobody_dir
    os.chown(base, user.pw_uid, user.pw_gid)
    done = subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
         *rotifer_command(), "doctor"], cwd=base, env=clean_env(), capture_output=True,
        text=True, timeout=120, check=False)
    assert done.returncode == 0, done
    found = rows(done.stdout)
    assert f"Genes run as: nobody (uid {user.pw_uid}" in done.stdout
    assert found["no capability"] == "yes" and found["genes never run as root"] == "yes"
    assert all(found[w] == "no" for w in ROOT_ONLY), done.stdout
    # The kernel's answer, asked directly: may nobody make a user namespace?
    userns = subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
         "unshare", "--user", "--mount", "--net", "true"], capture_output=True, check=False)
    want = "yes" if userns.returncode == 0 else "no"
    assert all(found[w] == want for w in IN_A_USER_NAMESPACE), done.stdout
    assert "not every promise holds here" in done.stdout


@pytest.mark.parametrize("spec", ["root", "0:0", "no-such-user-here"])
def test_a_gene_user_that_cannot_be_is_refused(tmp_path: Path, spec: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("the genes' user is chosen only when rotifer runs as root")
    root = init_project(tmp_path / "proj")
    add_gene(root, "g", "def express(input, ctx):\n    return input\n")
    line = last_line(refused_process(root, "GENE_UNAVAILABLE", "run", "g", "--input", "1",
                                     env={"ROTIFER_GENE_USER": spec}))
    assert f"ROTIFER_GENE_USER='{spec}'" in line, line
    assert ok_process(root, "run", "g", "--input", "1",
                      env={"ROTIFER_GENE_USER": "nobody"}) == "1\n"
