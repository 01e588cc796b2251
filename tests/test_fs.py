"""The filesystem seam's local implementation, on real files."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_skills.fs import (
    ConfinedFile,
    ConfinedReadError,
    DirEntry,
    FileReadError,
    LocalFileSystem,
    SkillFileSystem,
    _identities,
    _read_by_path,
    read_confined,
)

needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX symlinks and FIFOs")
# Permission checks mean nothing to root, so as root (as in CI) the permission tests run in a
# child process that gives up root once it has imported everything and set up its files.
_DROP_ROOT = """
if os.geteuid() == 0:
    os.setuid(65534)  # nobody
"""


def run_unprivileged(setup: str, check: str, directory: Path) -> str:
    """Run ``setup`` (as the current user), then ``check`` without root; return the output.

    Both are Python with ``os``, ``sys``, ``anyio`` and ``LocalFileSystem`` imported and the
    test's directory in ``sys.argv[1]``.
    """
    for path in (directory, *directory.parents):
        if path == Path(tempfile.gettempdir()):
            break
        path.chmod(path.stat().st_mode | 0o755)  # let the unprivileged child reach it
    script = "\n".join(
        [
            "import os, sys, anyio",
            # Everything the check needs is imported while the interpreter can still read its
            # own installation (it may live under root's home).
            "import anyio._backends._asyncio",
            "from acp_skills import LocalFileSystem",
            textwrap.dedent(setup),
            _DROP_ROOT,
            textwrap.dedent(check),
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_local_file_system_satisfies_the_protocol() -> None:
    """LocalFileSystem is a SkillFileSystem (statically and at runtime)."""
    fs: SkillFileSystem = LocalFileSystem()
    assert isinstance(fs, SkillFileSystem)


@pytest.mark.anyio
@needs_posix
async def test_list_dir_reports_each_kind_following_links(tmp_path: Path) -> None:
    """Directories, files, links to either, broken links and special files are told apart."""
    (tmp_path / "bundle").mkdir()
    (tmp_path / "flat.md").write_text("x")
    (tmp_path / "link-to-dir").symlink_to(tmp_path / "bundle")
    (tmp_path / "link-to-file").symlink_to(tmp_path / "flat.md")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "pipe")

    entries = await LocalFileSystem().list_dir(str(tmp_path))

    assert entries is not None
    assert sorted(entries, key=lambda entry: entry.name) == [
        DirEntry(name="bundle", kind="dir"),
        DirEntry(name="dangling", kind="broken_link"),
        DirEntry(name="flat.md", kind="file"),
        DirEntry(name="link-to-dir", kind="dir"),
        DirEntry(name="link-to-file", kind="file"),
        DirEntry(name="loop", kind="broken_link"),
        DirEntry(name="pipe", kind="other"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["missing", "file.md"], ids=["missing", "a-file"])
async def test_list_dir_of_a_missing_or_non_directory_path_is_none(
    tmp_path: Path, target: str
) -> None:
    """A root that is absent (or a file) lists as None, not an error."""
    (tmp_path / "file.md").write_text("x")
    assert await LocalFileSystem().list_dir(str(tmp_path / target)) is None


@pytest.mark.anyio
@needs_posix
async def test_list_dir_of_a_symlink_loop_raises_oserror(tmp_path: Path) -> None:
    """A directory that exists but cannot be read raises OSError."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(OSError, match="symbolic links"):
        await LocalFileSystem().list_dir(str(tmp_path / "loop"))


@needs_posix
def test_list_dir_of_an_unreadable_directory_raises_permission_error(tmp_path: Path) -> None:
    """Permission denied is an OSError, so the provider can warn about it."""
    setup = """
        locked = os.path.join(sys.argv[1], "locked")
        os.mkdir(locked)
        os.chmod(locked, 0)
    """
    check = """
        try:
            anyio.run(LocalFileSystem().list_dir, locked)
        except PermissionError:
            print("PermissionError")
    """
    assert run_unprivileged(setup, check, tmp_path) == "PermissionError"


@pytest.mark.anyio
@needs_posix
async def test_read_files_returns_one_result_per_path_in_order(tmp_path: Path) -> None:
    """A batch mixes contents and errors, in the order of the paths."""
    (tmp_path / "a.md").write_bytes(b"alpha")
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "big.md").write_bytes(b"x" * 11)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling.md").symlink_to(tmp_path / "nowhere")
    (tmp_path / "link.md").symlink_to(tmp_path / "a.md")
    paths = ["a.md", "missing.md", "empty.md", "big.md", "dir", "dangling.md", "link.md"]

    results = await LocalFileSystem().read_files([str(tmp_path / p) for p in paths], 10)

    assert list(results) == [
        b"alpha",
        FileReadError(reason="file not found", not_found=True),
        b"",
        FileReadError(reason="file is 11 bytes, over the 10-byte limit"),
        FileReadError(reason="is a directory"),
        FileReadError(reason="broken symbolic link"),
        b"alpha",
    ]


@pytest.mark.anyio
async def test_read_files_accepts_a_file_exactly_at_the_cap(tmp_path: Path) -> None:
    """The cap is inclusive."""
    (tmp_path / "edge.md").write_bytes(b"x" * 10)
    assert list(await LocalFileSystem().read_files([str(tmp_path / "edge.md")], 10)) == [b"x" * 10]


@pytest.mark.anyio
async def test_read_files_of_an_empty_batch_is_empty() -> None:
    """No paths, no results (and no worker thread)."""
    assert list(await LocalFileSystem().read_files([], 10)) == []


@pytest.mark.anyio
@needs_posix
async def test_read_files_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    """A FIFO in place of a skill file is an error, not a hang."""
    os.mkfifo(tmp_path / "pipe.md")
    with anyio.fail_after(5):
        results = await LocalFileSystem().read_files([str(tmp_path / "pipe.md")], 10)
    assert list(results) == [FileReadError(reason="not a regular file")]


@needs_posix
def test_read_files_reports_permission_denied(tmp_path: Path) -> None:
    """An unreadable file is an error with a reason."""
    setup = """
        secret = os.path.join(sys.argv[1], "secret.md")
        with open(secret, "w") as handle:
            handle.write("x")
        os.chmod(secret, 0)
    """
    check = """
        print(anyio.run(LocalFileSystem().read_files, [secret], 10))
    """
    assert run_unprivileged(setup, check, tmp_path) == (
        "[FileReadError(reason='permission denied', not_found=False)]"
    )


@pytest.mark.anyio
@needs_posix
async def test_exists_sees_files_and_directories_but_not_broken_links(tmp_path: Path) -> None:
    """`.git` may be a directory or a file; a dangling link does not count."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("gitdir: elsewhere\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    fs = LocalFileSystem()
    assert await fs.exists(str(tmp_path / "dir"))
    assert await fs.exists(str(tmp_path / "file"))
    assert not await fs.exists(str(tmp_path / "dangling"))
    assert not await fs.exists(str(tmp_path / "missing"))


# -- confined reads ----------------------------------------------------------------------------


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


def by_path(box: Path, path: str, *, excluded: tuple[str, ...] = ()) -> object:
    # The fallback for systems that cannot open relative to a directory descriptor (Windows).
    result = _read_by_path(os.path.realpath(box), path, 64, _identities(excluded))
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
]


@needs_posix
@pytest.mark.parametrize("read", [walked, by_path], ids=["walking", "by-path"])
@pytest.mark.parametrize(
    ("path", "expected"),
    [case[1:] for case in CONFINED_CASES],
    ids=[case[0] for case in CONFINED_CASES],
)
def test_read_confined_follows_links_only_inside(
    confined: Path, read: Any, path: str, expected: object
) -> None:
    """Links are followed while they stay inside the directory; anything else is refused."""
    assert read(confined, path) == expected


@needs_posix
def test_read_confined_refuses_a_symbolic_link_loop(confined: Path) -> None:
    """A link to itself ends the walk with the system's own ELOOP text, not a hang."""
    result = read_confined(str(confined), "loop", 64)
    assert result == ConfinedReadError(failure="unreadable", detail=os.strerror(errno.ELOOP))


@needs_posix
@pytest.mark.parametrize("read", [walked, by_path], ids=["walking", "by-path"])
@pytest.mark.parametrize(
    "path",
    ["hidden/SKILL.md", "alias/SKILL.md", "hard-link.md"],
    ids=["direct", "through-a-link", "hard-link"],
)
def test_read_confined_never_reaches_an_excluded_file_or_directory(
    confined: Path, read: Any, path: str
) -> None:
    """Exclusions compare identities: another name, a link or a hard link is refused too."""
    hidden = confined / "hidden"
    excluded = (str(hidden), str(hidden / "SKILL.md"), str(confined / "nowhere"))
    assert read(confined, path, excluded=excluded) == "excluded"
    assert read(confined, "a/file.txt", excluded=excluded) == b"inside"
    # An excluded directory closes everything below it.
    assert read(confined, "alias/SKILL.md", excluded=(str(hidden),)) == "excluded"


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
    assert read_confined(str(tmp_path), "over.txt", 64) == ConfinedReadError(
        failure="too_large", size=65
    )


def test_read_confined_in_a_missing_directory_finds_nothing(tmp_path: Path) -> None:
    """A skill directory that has vanished is "not found", not an exception."""
    assert walked(tmp_path / "gone", "SKILL.md") == "not_found"


def test_read_confined_finds_nothing_at_a_path_holding_a_nul(tmp_path: Path) -> None:
    """A NUL can be in no file name: "not found", not the ValueError the system calls raise."""
    assert read_confined(str(tmp_path), "a\0b", 64) == ConfinedReadError(failure="not_found")
    assert read_confined(f"{tmp_path}\0x", "a", 64) == ConfinedReadError(failure="not_found")


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
        "ConfinedReadError(failure='unreadable', size=0, detail='Permission denied')"
    )


@pytest.mark.anyio
async def test_local_file_system_reads_confined_files_in_a_worker_thread(tmp_path: Path) -> None:
    """The async method gives what the blocking function gives."""
    (tmp_path / "a.txt").write_text("alpha")
    result = await LocalFileSystem().read_confined(str(tmp_path), "a.txt", 64)
    assert isinstance(result, ConfinedFile)
    assert result.data == b"alpha"
