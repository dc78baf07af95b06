"""The kernels the lab runner starts: on Unix sockets, quiet at shutdown, holding the run folder's lock while they
live, and traced when they die: the cell that was running, and an executed notebook of what ran until then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ENGINE = "workshop"  # papermill's engine for the labs: nbclient's, keeping the notebook of a kernel that died


def kernel_config(socket_dir: Path | str):
    """Talk to the kernel over Unix sockets (IPC) instead of TCP on loopback: no ports, no network at all."""
    from traitlets.config import Config

    cfg = Config()
    cfg.KernelManager.transport = "ipc"
    # absolute: the kernel runs in the notebook's folder, and a relative socket path would point elsewhere there
    cfg.KernelManager.ip = str((Path(socket_dir) / "kernel").resolve())
    return cfg


def quiet_shutdown_kernel_manager(hold_fd: int | None = None):
    """jupyter_client's kernel manager, minus the SIGINT it sends before every shutdown (to stop a busy kernel): a
    lab's kernel is idle by then, and a SIGINT that lands inside a message handler only makes the kernel log
    "ERROR | KeyboardInterrupt caught in kernel" into a run that passed. With ``hold_fd`` (the run folder's lock)
    the kernel holds that open file too: a run into the folder is refused until the kernel has gone."""
    from jupyter_client import AsyncKernelManager

    class QuietShutdown(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd, **kw) -> None:
            if hold_fd is not None:
                kw["pass_fds"] = (*kw.get("pass_fds", ()), hold_fd)
            await super()._async_launch_kernel(kernel_cmd, **kw)

    return QuietShutdown


def register_engine() -> Any:
    """papermill's nbclient engine, which on any failure keeps the notebook as it stood (``Keeping.notebook``):
    papermill writes none when the kernel dies."""
    from papermill.engines import NBClientEngine, papermill_engines

    class Keeping(NBClientEngine):
        notebook = None

        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            Keeping.notebook = None
            try:
                return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
            except BaseException:
                Keeping.notebook = nb_man.nb
                raise

    papermill_engines.register(ENGINE, Keeping)
    return Keeping


def trace_dead_kernel(notebook, executed: Path, error: BaseException, oom_where: str = "") -> str:
    """The cell that was running when the kernel died (the last one papermill started), marked as failed in an
    executed notebook written to ``executed`` with everything before it; and what to say: where, and why
    (``oom_where``: the OOM killer struck meanwhile, under this limit)."""
    import nbformat

    started = [i for i, c in enumerate(notebook.cells) if c.get("metadata", {}).get("papermill", {}).get("start_time")]
    if not started:
        return f"{type(error).__name__}: {error} (before the first cell ran)"
    index = started[-1]
    cell = notebook.cells[index]
    why = (
        f"out of memory: the OOM killer ended a process meanwhile ({oom_where})"
        if oom_where
        else "ended from outside (a kill, a restart) or by a crash in native code"
    )
    said = f"the kernel died while this cell ran ({type(error).__name__}: {error}; {why})"
    cell.metadata.papermill.update(status="failed", exception=True)
    cell.outputs.append(nbformat.v4.new_output("error", ename=type(error).__name__, evalue=said, traceback=[said]))
    for later in notebook.cells[index + 1 :]:
        later.metadata.get("papermill", {}).update(status="pending")
    nbformat.write(notebook, str(executed))
    heading, first = _heading_before(notebook.cells, index), cell.source.strip().splitlines()[:1]
    where = f"under '{heading}', " if heading else ""
    return f"cell {index} ({where}{first[0][:60] if first else 'empty'!r}): {said}"


def _heading_before(cells, index: int) -> str:
    for cell in reversed(cells[:index]):
        if cell.cell_type == "markdown":
            lines = [line.lstrip("# ").strip() for line in cell.source.splitlines() if line.startswith("#")]
            if lines:
                return lines[-1]
    return ""
