"""The policy node's Trigger services (~/start_episode, ~/reset) as coroutines: the answer is the
runtime's control thread's (ok, message), or a refusal after `timeout_s` or when the node is not
active. The executor keeps serving the e-stop, images and states while one awaits, on one thread.
Plain Python: the node passes rclpy's Future class and its executor's wake-up."""
from __future__ import annotations

import threading
from typing import Any, Callable


def episode_services(runtime: Callable[[], Any], timeout_s: float, future_type: type, wake: Callable[[], None]):
    """{service name: async Trigger callback}: ~/start_episode (start with the last instruction) and
    ~/reset (stop the episode; the arm holds)."""
    return {"~/start_episode": trigger_handler(runtime, lambda rt, done: rt.request_start(None, on_done=done),
                                               timeout_s, future_type, wake),
            "~/reset": trigger_handler(runtime, lambda rt, done: rt.request_stop("reset service", on_done=done),
                                       timeout_s, future_type, wake)}


def trigger_handler(runtime: Callable[[], Any], request_fn: Callable[[Any, Callable[[bool, str], None]], None],
                    timeout_s: float, future_type: type, wake: Callable[[], None]):
    """An async Trigger callback: `request_fn(runtime, done)` queues the command on the runtime
    (`runtime()`: None when the node is not active); the first of `done(ok, message)` and the
    timeout answers, then `wake()` resumes the awaiting service at once."""
    async def handle(request, response):
        rt = runtime()
        if rt is None:
            response.success, response.message = False, "the policy node is not active"
            return response
        future, lock = future_type(), threading.Lock()

        def done(ok: bool, message: str) -> None:   # control thread or timer; the first answer counts
            with lock:
                if future.done():
                    return
                future.set_result((ok, message))
            wake()                                  # resume the awaiting service now, not at the next message
        timer = threading.Timer(timeout_s, done, (False, f"still busy after {timeout_s:.0f} s"))
        timer.daemon = True
        timer.start()
        request_fn(rt, done)
        response.success, response.message = await future
        timer.cancel()
        return response
    return handle
