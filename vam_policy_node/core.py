"""What the policy node holds between its ROS callbacks, in plain Python: the policy, the control
loop built around it (`params.control_from_params`), the instruction mailbox, the e-stop latch,
and the messages its targets, telemetry and diagnostics become. The node (node.py) declares parameters,
converts messages and wires topics, services and timers to this object."""
from __future__ import annotations

import threading
from typing import Any, Callable

from vam_control.build import diagnostics, release
from vam_control.pacing import IncreasingStamps
from vam_policy_node.instructions import InstructionMailbox
from vam_policy_node.params import control_from_params
from vam_stack import msgs, rclpy_msgs
from vam_stack.instruction import check_instruction
from vam_stack.recording import json_ready

# telemetry keys the executor keeps for itself: not published on /vam/telemetry
PRIVATE_TELEMETRY = ("actions", "origin_tick", "latency_s")


def telemetry_messages(tel: dict) -> list[tuple[str, Any]]:
    """(output, message) for one replan's telemetry: /vam/telemetry as JSON, and the attention map
    on its own topic (/vam/attention, dims action x video_token) when the policy gave one."""
    public = {k: json_ready(v) for k, v in tel.items() if k not in PRIVATE_TELEMETRY and k != "attention"}
    out = [("telemetry", msgs.json_msg(public))]
    if tel.get("attention") is not None:
        out.append(("attention", msgs.float32_array_msg(tel["attention"], ["action", "video_token"])))
    return out


class PolicyCore:
    """The policy and its runtime across the node's lifecycle: `configure` builds them, `activate` /
    `deactivate` open and close the instruction path, `release` lets them go (idempotent). An
    e-stop that arrives before `configure` is latched and applied to the runtime it builds."""

    def __init__(self) -> None:
        self.policy: Any = None
        self.control: Any = None              # vam_control.build.Control; kept after release (its names)
        self.runtime: Any = None              # vam_control.runtime.PolicyRuntime while configured
        self.mailbox: InstructionMailbox | None = None
        self.active = False                   # instructions and the episode services are taken
        self.estop_latched = False
        self.warm_up_times: dict = {}
        self._stamps = IncreasingStamps()     # /vam/joint_targets stamps, strictly increasing
        self._lock = threading.Lock()         # release swaps the parts out at once

    def configure(self, policy: Any, params: dict, send: Callable, on_telemetry: Callable, log: Any) -> None:
        """Build the control loop around `policy` (warmed up as `params` say); raises what the build raised."""
        self.policy = policy
        self.control, self.warm_up_times = control_from_params(policy, params, send, on_telemetry, log)
        runtime = self.runtime = self.control.runtime

        def start(text: str, done: Callable[[bool, str], None]) -> None:
            runtime.request_start(text, on_done=done)

        def running() -> str | None:
            return runtime.instruction if runtime.running else None

        self.mailbox = InstructionMailbox(start, running)
        if self.estop_latched:
            runtime.estop(True)

    def activate(self, instruction: str) -> None:
        """Take instructions; start `instruction` now when it is not empty."""
        self.active = True
        if instruction:
            self.runtime.request_start(instruction)

    def deactivate(self) -> None:
        """Refuse instructions, forget a waiting one and stop the episode (the arm holds)."""
        self.active = False
        if self.mailbox is not None:
            self.mailbox.clear()
        self.runtime.request_stop("deactivated", wait=True)

    def active_runtime(self) -> Any:
        """The runtime the episode services act on; None when the node is not active."""
        return self.runtime if self.active else None

    def takes_instructions(self) -> bool:
        """Configured and active: an instruction may start an episode."""
        return self.mailbox is not None and self.active

    def instruct(self, raw: str) -> str | None:
        """Check an instruction (ValueError: refused, so junk never replaces a valid one) and hand it
        to the mailbox; what it replaces, for the log (None: nothing)."""
        text = check_instruction(raw)
        return self.mailbox.offer(text).describe(text)

    def target_messages(self, sent: Any, now_ns: int, outputs: Any) -> list[tuple[str, Any]]:
        """(output, rclpy message) for one filtered target, built once (`vam_stack.rclpy_msgs`):
        /vam/joint_targets named as the runtime's action names and tagged with the filter's source,
        and for ros2_control the `outputs` asked for (joint_trajectory: one point reached a period
        later; forward_commands). Stamped strictly after the last (the driver refuses one that is
        not: two ticks can read one /clock)."""
        c, stamp = self.control, self._stamps.next(now_ns)
        out = [("joint_targets", rclpy_msgs.joint_state(c.action_names, sent, stamp_ns=stamp, frame_id=c.target_source))]
        if "joint_trajectory" in outputs:
            out.append(("joint_trajectory", rclpy_msgs.joint_trajectory(c.action_names, sent, c.period_s, stamp,
                                                                        c.target_source)))
        if "forward_commands" in outputs:
            out.append(("forward_commands", rclpy_msgs.float64_array(sent)))
        return out

    def estop(self, latched: bool) -> None:
        """Latch or release the e-stop: an instruction waiting its turn is forgotten either way, and so
        is every start queued before it (the runtime's docstring)."""
        self.estop_latched = latched
        mailbox, runtime = self.mailbox, self.runtime
        if mailbox is not None:
            mailbox.clear()
        if runtime is not None:
            runtime.estop(latched)

    def release(self, budget_s: float) -> bool:
        """Stop the executor (the driver holds), release the policy; False: still stopping after
        `budget_s`. Idempotent."""
        self.active = False
        with self._lock:
            runtime, mailbox, policy = self.runtime, self.mailbox, self.policy
            self.runtime = None
            self.mailbox = None
            self.policy = None
        if mailbox is not None:
            mailbox.clear()
        return release(runtime, policy, budget_s)

    def diagnostics(self, refused: dict[str, int], hardware_id: str, frames_in: Any) -> list[dict]:
        """The /diagnostics statuses (`vam_control.build.diagnostics`) with the refusal counts by kind."""
        extra = {f"refused_{kind.replace(' ', '_')}s": total for kind, total in refused.items()}
        extra["instructions_coalesced"] = self.mailbox.coalesced if self.mailbox is not None else 0
        return diagnostics(self.runtime, extra, self.estop_latched, hardware_id, frames_in)
