"""A slow leak among a busy cache, in Python, for -e malloc --live
--min-age: once the file GO exists, 16 KiB bytearrays (allocated by
CPython through the C library's malloc: above pymalloc's 512 bytes) go
into a cache that keeps the newest 1000 and none older than 1.5 s
(on the host 1000 are under half a second's worth; an emulated guest
runs slower: the age bound keeps every block in it young), and every 10th turn one goes into a list
never emptied, from leak_here, for LEAK seconds. At RUN seconds it prints
"done leaked BYTES" (the leak's bytes as malloc was asked for them) and
goes on filling the cache, without leaking, until killed: the recording
is stopped while the cache is still busy and the leak at least RUN - LEAK
seconds old.
Usage: python3 py_leak_age.py GO LEAK RUN"""
import collections
import os
import sys
import time

BLOCK = 16384
# What malloc is asked for a bytearray of BLOCK bytes: one more, for the
# terminating NUL CPython keeps after its bytes.
MALLOC_BYTES = BLOCK + 1


def cache_fill(cache):
    now = time.monotonic()
    for _ in range(10):
        cache.append((now, bytearray(BLOCK)))
    while cache and now - cache[0][0] > 1.5:
        cache.popleft()


def leak_here(leak):
    leak.append(bytearray(BLOCK))


def main():
    go, leak_seconds, run_seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.01)
    cache, leak = collections.deque(maxlen=1000), []
    start = time.monotonic()
    turn = 0
    done = False
    while True:
        cache_fill(cache)
        elapsed = time.monotonic() - start
        if turn % 10 == 0 and elapsed < leak_seconds:
            leak_here(leak)
        if not done and elapsed >= run_seconds:
            print("done leaked", len(leak) * MALLOC_BYTES, flush=True)
            done = True
        turn += 1
        time.sleep(0.005)


main()
