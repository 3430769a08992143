"""VeRL tool for BaT rows: ``execute_code(language, code)`` in a workspace
that lives for one trajectory.

``create`` seeds a fresh workspace from the row's task contract (the row's
``extra_info`` arrives through ``tools_kwargs.execute_code.create_kwargs``,
see prepare_data.py); ``execute`` runs the code there with bat_sandbox's
limits and returns its clipped output; ``release`` deletes the workspace.
The reward (bat_reward.compute_score) replays the trajectory's tool calls
in a fresh sandbox, so the score does not depend on this process's state.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from uuid import uuid4

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bat_reward  # noqa: E402
import bat_sandbox  # noqa: E402

from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import ToolResponse  # noqa: E402


class BatExecuteCodeTool(BaseTool):
    def __init__(self, config: dict, tool_schema):
        super().__init__(config, tool_schema)
        self.timeout = float(config.get("timeout_seconds", 5))
        self.max_chars = int(config.get("max_output_chars", 2048))
        self.pack = bat_reward.load_pack(config.get("pack_path"))
        self.workspaces: dict = {}

    async def create(self, instance_id=None, **kwargs):
        instance_id = instance_id or str(uuid4())
        create_kwargs = kwargs.get("create_kwargs") or {}
        extra = json.loads(create_kwargs.get("bat_extra_info_json", "{}"))
        root = tempfile.mkdtemp(prefix="bat-verl-tool-")
        bat_sandbox.seed_workspace(root, bat_reward.task_contract(self.pack, extra))
        self.workspaces[instance_id] = root
        return instance_id, ToolResponse()

    async def execute(self, instance_id, parameters, **kwargs):
        root = self.workspaces.get(instance_id)
        language, code = parameters.get("language"), parameters.get("code")
        if root is None or set(parameters) != {"language", "code"} or language not in ("bash", "python"):
            return ToolResponse(text="error: pass exactly language (bash|python) and code"), 0.0, {"ok": 0}
        argv = ["bash", "-c", code] if language == "bash" else [sys.executable, "-I", "-c", code]
        try:
            r = subprocess.run(
                argv, cwd=root, env={"PATH": "/usr/bin:/bin", "HOME": root, "LC_ALL": "C"},
                stdin=subprocess.DEVNULL, capture_output=True, timeout=self.timeout,
            )
            text = (r.stdout + r.stderr).decode("utf-8", "replace") + f"\n[exit {r.returncode}]"
            ok = r.returncode == 0
        except subprocess.TimeoutExpired:
            text, ok = f"[timed out after {self.timeout} s]", False
        return ToolResponse(text=text[-self.max_chars :]), 0.0, {"ok": int(ok)}

    async def calc_reward(self, instance_id, **kwargs):
        return 0.0

    async def release(self, instance_id, **kwargs):
        root = self.workspaces.pop(instance_id, None)
        if root:
            shutil.rmtree(root, ignore_errors=True)
