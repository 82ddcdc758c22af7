"""ipywidgets views over session snapshots, for Jupyter notebooks."""

from triton_ge_console.widgets.command_runner import CommandRunner
from triton_ge_console.widgets.dashboard import Dashboard
from triton_ge_console.widgets.devices import DeviceGauges
from triton_ge_console.widgets.fleet import FleetDashboard
from triton_ge_console.widgets.generation import GenerationPanel
from triton_ge_console.widgets.loadtest import LoadTestControl
from triton_ge_console.widgets.logtail import FilteredLogTail
from triton_ge_console.widgets.model_charts import ModelCharts
from triton_ge_console.widgets.models import ModelsPanel
from triton_ge_console.widgets.poller import BackgroundPoller
from triton_ge_console.widgets.progress import ProgressWidget

__all__ = [
           "BackgroundPoller",
           "CommandRunner",
           "Dashboard",
           "DeviceGauges",
           "FilteredLogTail",
           "FleetDashboard",
           "GenerationPanel",
           "LoadTestControl",
           "ModelCharts",
           "ModelsPanel",
           "ProgressWidget",
]
