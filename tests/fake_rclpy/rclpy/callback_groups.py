"""rclpy.callback_groups as in rclpy (rclpy/callback_groups.py): a group holds weak references
to its entities; a MutuallyExclusiveCallbackGroup lets one of them run at a time (asserting the
entity belongs to it), a ReentrantCallbackGroup lets any run in parallel. Every entity a node
makes without a group goes to the node's default group, a MutuallyExclusiveCallbackGroup."""
from __future__ import annotations

import threading
import weakref


class CallbackGroup:
    def __init__(self) -> None:
        super().__init__()
        self.entities: set = set()

    def add_entity(self, entity) -> None:
        self.entities.add(weakref.ref(entity))

    def has_entity(self, entity) -> bool:
        return weakref.ref(entity) in self.entities

    def can_execute(self, entity) -> bool:
        raise NotImplementedError()

    def beginning_execution(self, entity) -> bool:
        raise NotImplementedError()

    def ending_execution(self, entity) -> None:
        raise NotImplementedError()


class ReentrantCallbackGroup(CallbackGroup):
    def can_execute(self, entity) -> bool:
        return True

    def beginning_execution(self, entity) -> bool:
        return True

    def ending_execution(self, entity) -> None:
        pass


class MutuallyExclusiveCallbackGroup(CallbackGroup):
    def __init__(self) -> None:
        super().__init__()
        self._active_entity = None
        self._lock = threading.Lock()

    def can_execute(self, entity) -> bool:
        with self._lock:
            assert weakref.ref(entity) in self.entities
            return self._active_entity is None

    def beginning_execution(self, entity) -> bool:
        with self._lock:
            assert weakref.ref(entity) in self.entities
            if self._active_entity is None:
                self._active_entity = entity
                return True
        return False

    def ending_execution(self, entity) -> None:
        with self._lock:
            assert self._active_entity == entity
            self._active_entity = None
