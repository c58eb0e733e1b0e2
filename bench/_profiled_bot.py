"""agentlab's bot process (`python -m telegram_bot`, the same entry point) with a profiler that the overhead bench
switches on and off by signal, so a profile holds the measured answers only (not the start-up, the warm-up or the
deferred start-up work): SIGUSR1 starts cProfile on the main thread (where the bot's event loop runs), SIGUSR2 stops
it and writes the stats to the file named by the first argument.

    python bench/_profiled_bot.py STATS_FILE
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys


def main(stats_file: str) -> None:
    profiler = cProfile.Profile()

    def start(_signum: int, _frame: object) -> None:
        profiler.enable()

    def stop(_signum: int, _frame: object) -> None:
        profiler.disable()
        profiler.dump_stats(stats_file)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["telegram_bot"]
    runpy.run_module("telegram_bot", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1])
