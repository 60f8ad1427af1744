"""The verification reports, as other packages read them: JSON in, checked, text out.

The public face of the three reports (the CPU verification's ``verify-cpu.json`` of either
generation, the GPU session's ``verify-gpu.json`` and the served GPU session's report) for
readers outside verify (:mod:`patchwheel.results`). It imports only the report modules, so
reading a report needs neither the build side nor torch.
"""

from __future__ import annotations

from patchwheel.verify.gpu.report import check_schema as check_gpu_report
from patchwheel.verify.gpu.report import markdown_summary as gpu_report_summary
from patchwheel.verify.gpu.served_summary import judge as judge_served_gpu_report
from patchwheel.verify.gpu.served_summary import summary as served_gpu_report_summary
from patchwheel.verify.report import read_report
from patchwheel.verify.served.report import read_served_report

__all__ = [
    "check_gpu_report",
    "gpu_report_summary",
    "judge_served_gpu_report",
    "read_report",
    "read_served_report",
    "served_gpu_report_summary",
]
