"""The filesystem seam's local implementation, on real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from acp_skills.errors import ReadError
from acp_skills.fs import DirEntry, LocalFileSystem, SkillFileSystem
from tests.unprivileged import run_unprivileged

needs_posix = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX symlinks and FIFOs")


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
        ReadError(failure="not_found"),
        b"",
        ReadError(failure="too_large", size=11, limit=10),
        ReadError(failure="directory"),
        ReadError(failure="broken_link"),
        b"alpha",
    ]


@pytest.mark.anyio
async def test_read_files_accepts_a_file_exactly_at_the_cap(tmp_path: Path) -> None:
    """The cap is inclusive."""
    (tmp_path / "edge.md").write_bytes(b"x" * 10)
    assert list(await LocalFileSystem().read_files([str(tmp_path / "edge.md")], 10)) == [b"x" * 10]


@pytest.mark.anyio
async def test_read_files_reads_on_after_a_short_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read may return fewer bytes than asked (a FUSE or network filesystem does): the file
    is read to its end, never cut at the first short read."""
    data = bytes(range(256)) * 40
    (tmp_path / "skill.md").write_bytes(data)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, size: real_read(fd, min(size, 1000)))
    assert list(await LocalFileSystem().read_files([str(tmp_path / "skill.md")], 20_000)) == [data]


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
    assert list(results) == [ReadError(failure="not_regular")]


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
        "[ReadError(failure='unreadable', size=0, limit=0, detail='Permission denied', entries=())]"
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


def test_anyio_backend_loads_with_the_library() -> None:
    """The one private module the library names (docs/architecture.md): this fails loudly the
    day anyio moves it, instead of the first discovery silently growing 40 ms slower."""
    probe = "import sys, acp_skills.fs; print('anyio._backends._asyncio' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == "True", result.stderr
