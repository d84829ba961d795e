"""Handlers the worker tests run in a real worker process."""

import ctypes
import os
import time


def echo(request, state):
    state["calls"] = state.get("calls", 0) + 1
    return {"echo": request, "calls": state["calls"], "setup": state["setup"]}


def misbehave(request, state):
    if request == "exit":
        os._exit(3)
    if request == "segfault":
        ctypes.string_at(0)
    if request == "hang":
        time.sleep(3600)
    if request == "raise":
        raise ValueError("bad candidate")
    return "fine"
