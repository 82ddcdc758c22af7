"""ipywidgets views over session snapshots, for Jupyter notebooks."""

from triton_ge_console.widgets.commands import CommandRunner
from triton_ge_console.widgets.dashboard import Dashboard
from triton_ge_console.widgets.devices import DeviceGauges
from triton_ge_console.widgets.loadtest import LoadTestControl
from triton_ge_console.widgets.logtail import LogTail
from triton_ge_console.widgets.model_charts import ModelCharts
from triton_ge_console.widgets.models import ModelsTable
from triton_ge_console.widgets.poller import Poller
from triton_ge_console.widgets.progress import ProgressWidget

__all__ = ["CommandRunner", "Dashboard", "DeviceGauges", "LoadTestControl", "LogTail", "ModelCharts",
           "ModelsTable", "Poller", "ProgressWidget"]
