"""Race-free reads inside one directory (`acp_skills.fs`), on real files."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_skills.errors import ReadError
from acp_skills.fs import ConfinedFile, read_confined
from tests.unprivileged import run_unprivileged

needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX symlinks")


@pytest.fixture
def confined(tmp_path: Path) -> Path:
    """A directory to confine reads to, with links inside, out of it, and back into it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside")
    (tmp_path / "outside" / "back-in").symlink_to(tmp_path / "box" / "a" / "file.txt")
    box = tmp_path / "box"
    (box / "a" / "b").mkdir(parents=True)
    (box / "a" / "file.txt").write_text("inside")
    (box / "a" / "b" / "up.txt").symlink_to(Path("..") / "file.txt")
    (box / "a" / "b" / "too-far.txt").symlink_to(
        Path("..") / ".." / ".." / "outside" / "secret.txt"
    )
    (box / "a" / "absolute.txt").symlink_to(box / "a" / "file.txt")
    (box / "a" / "relative-dir").symlink_to("b", target_is_directory=True)
    (box / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (box / "via-outside.txt").symlink_to(tmp_path / "outside" / "back-in")
    (box / "loop").symlink_to("loop")
    (box / "hidden").mkdir()
    (box / "hidden" / "SKILL.md").write_text("hidden body")
    (box / "alias").symlink_to("hidden", target_is_directory=True)
    os.link(box / "hidden" / "SKILL.md", box / "hard-link.md")
    return box


def walked(box: Path, path: str, *, excluded: tuple[str, ...] = ()) -> object:
    result = read_confined(str(box), path, 64, excluded=excluded)
    return result.data if isinstance(result, ConfinedFile) else result.failure


CONFINED_CASES: list[tuple[str, str, object]] = [
    ("plain", "a/file.txt", b"inside"),
    ("dot-segments", "./a//./file.txt", b"inside"),
    ("relative-link-climbing-inside", "a/b/up.txt", b"inside"),
    ("absolute-link-inside", "a/absolute.txt", b"inside"),
    ("link-to-a-directory-inside", "a/relative-dir/up.txt", b"inside"),
    ("out-and-back-in", "via-outside.txt", b"inside"),
    ("relative-link-climbing-out", "a/b/too-far.txt", "outside"),
    ("directory-link-out", "out/secret.txt", "outside"),
    ("missing", "a/missing.txt", "not_found"),
    ("through-a-file", "a/file.txt/x", "not_found"),
    ("directory", "a", "directory"),
    ("the-directory-itself", ".", "directory"),
    # The tool refuses a ".." segment with its own words first; here it is confined all the same.
    ("dot-dot-inside", "a/../a/file.txt", b"inside"),
    ("dot-dot-out", "a/../../outside/secret.txt", "outside"),
]


@needs_posix
@pytest.mark.parametrize(
    ("path", "expected"),
    [case[1:] for case in CONFINED_CASES],
    ids=[case[0] for case in CONFINED_CASES],
)
def test_read_confined_follows_links_only_inside(
    confined: Path, path: str, expected: object
) -> None:
    """Links are followed while they stay inside the directory; anything else is refused."""
    assert walked(confined, path) == expected


@needs_posix
def test_read_confined_refuses_a_symbolic_link_loop(confined: Path) -> None:
    """A link to itself ends the walk with the system's own ELOOP text, not a hang."""
    result = read_confined(str(confined), "loop", 64)
    assert result == ReadError(failure="unreadable", detail=os.strerror(errno.ELOOP))


@needs_posix
@pytest.mark.parametrize(
    "path",
    ["hidden/SKILL.md", "alias/SKILL.md", "hard-link.md"],
    ids=["direct", "through-a-link", "hard-link"],
)
def test_read_confined_never_reaches_an_excluded_file_or_directory(
    confined: Path, path: str
) -> None:
    """Exclusions compare identities: another name, a link or a hard link is refused too."""
    hidden = confined / "hidden"
    excluded = (str(hidden), str(hidden / "SKILL.md"), str(confined / "nowhere"))
    assert walked(confined, path, excluded=excluded) == "excluded"
    assert walked(confined, "a/file.txt", excluded=excluded) == b"inside"
    # An excluded directory closes everything below it.
    assert walked(confined, "alias/SKILL.md", excluded=(str(hidden),)) == "excluded"


@needs_posix
def test_read_confined_reports_the_walked_path_and_identity(confined: Path) -> None:
    """The returned path has no links left in it and names the file that was read."""
    result = read_confined(str(confined), "a/b/up.txt", 64)
    assert isinstance(result, ConfinedFile)
    assert result.path == os.path.join(os.path.realpath(confined), "a", "file.txt")
    info = os.stat(confined / "a" / "file.txt")
    assert result.identity == (info.st_dev, info.st_ino)


def test_read_confined_applies_the_size_cap(tmp_path: Path) -> None:
    """The cap is inclusive, and the size is reported when it is exceeded."""
    (tmp_path / "edge.txt").write_bytes(b"x" * 64)
    (tmp_path / "over.txt").write_bytes(b"x" * 65)
    assert walked(tmp_path, "edge.txt") == b"x" * 64
    assert read_confined(str(tmp_path), "over.txt", 64) == ReadError(
        failure="too_large", size=65, limit=64
    )


def test_read_confined_in_a_missing_directory_finds_nothing(tmp_path: Path) -> None:
    """A skill directory that has vanished is "not found", not an exception."""
    assert walked(tmp_path / "gone", "SKILL.md") == "not_found"


def test_read_confined_finds_nothing_at_a_path_holding_a_nul(tmp_path: Path) -> None:
    """A NUL can be in no file name: "not found", not the ValueError the system calls raise."""
    assert read_confined(str(tmp_path), "a\0b", 64) == ReadError(failure="not_found")
    assert read_confined(f"{tmp_path}\0x", "a", 64) == ReadError(failure="not_found")


@needs_posix
def test_read_confined_reports_permission_denied(tmp_path: Path) -> None:
    """A directory on the way that may not be entered is "unreadable", with the reason."""
    setup = """
        locked = os.path.join(sys.argv[1], "locked")
        os.makedirs(locked)
        with open(os.path.join(locked, "file.txt"), "w") as handle:
            handle.write("x")
        os.chmod(locked, 0)
    """
    check = """
        from acp_skills.fs import read_confined
        print(read_confined(sys.argv[1], "locked/file.txt", 64))
    """
    assert run_unprivileged(setup, check, tmp_path) == (
        "ReadError(failure='unreadable', size=0, limit=0, detail='Permission denied', entries=())"
    )


_DEEP_READ = """
import os, resource, sys
from acp_skills.fs import read_confined
root, path = sys.argv[1], sys.argv[2]
open_now = len(os.listdir("/proc/self/fd"))
# Room for the root, the current entry and a few spare: one per segment would not fit.
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 6, hard))
result = read_confined(root, path, 1024)
left_open = len(os.listdir("/proc/self/fd")) - open_now
print(type(result).__name__, getattr(result, "data", b"").decode(), left_open)
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_confined_read_of_a_path_three_hundred_segments_deep(tmp_path: Path) -> None:
    """A confined read held one descriptor per segment: a deep path ran out of descriptors.
    A process: the descriptor limit it lowers is the whole process's."""
    segments = [f"d{index}" for index in range(300)]
    deep = tmp_path.joinpath(*segments)
    deep.mkdir(parents=True)
    (deep / "file.md").write_text("deep text", encoding="utf-8")
    path = "/".join([*segments, "file.md"])
    done = subprocess.run(
        [sys.executable, "-c", _DEEP_READ, str(tmp_path), path],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ConfinedFile", "deep", "text", "0"]
