"""Known Python call chains for ember's tests, in every CPython from 3.8:
the main thread spins in outer -> Shapes.middle -> inner (a method, so
3.11+ qualified names show the class), a second thread sleeps in
waiter -> nap, a third runs a coroutine chain under asyncio (main_task ->
step -> leaf_spin). Prints "ready" once each thread is in its last function.
Usage: python3 py_chains.py SECONDS"""
import asyncio
import sys
import threading
import time

END = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 60)
napping = threading.Event()
spinning = threading.Event()


def inner():
    napping.wait()
    spinning.wait()
    print("ready", flush=True)
    x = 0
    while time.time() < END:
        for i in range(10000):
            x += i * i
    return x


class Shapes:
    def middle(self):
        return inner()


def outer():
    return Shapes().middle()


def nap():
    napping.set()
    while time.time() < END:
        time.sleep(0.05)


def waiter():
    nap()


async def leaf_spin():
    await asyncio.sleep(0)  # once through the event loop; never again, so the chain stays put
    spinning.set()
    x = 0
    while time.time() < END:
        for i in range(10000):
            x += i
    return x


async def step():
    return await leaf_spin()


async def main_task():
    return await step()


def loop_thread():
    asyncio.run(main_task())


threads = [threading.Thread(target=waiter, name="waiter"), threading.Thread(target=loop_thread, name="loop")]
for t in threads:
    t.start()
outer()
for t in threads:
    t.join()
