"""A known split of CPU time between three Python functions, for
bench/runtimes.sh: each work unit (a loop of random length) runs in alpha,
beta or gamma, picked at random 5:3:2, so a sampler that does not alias
with the units sees them 50%, 30% and 20% of the time. Each function has
a loop of its own: the innermost Python frame of a sample is one of them.
At the end it prints the CPU time each took ("alpha_ns N", ...): the truth
a sampler is judged by, whatever the interpreter made of the three.
Usage: python3 py_split.py SECONDS"""
import random
import sys
import time


def alpha(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def beta(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def gamma(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def main(seconds):
    end = time.time() + seconds
    pick = random.Random(7)
    functions = [alpha] * 5 + [beta] * 3 + [gamma] * 2
    spent = dict.fromkeys(functions, 0)
    while time.time() < end:
        f, n = pick.choice(functions), pick.randint(2000, 6000)
        t = time.thread_time_ns()
        f(n)
        spent[f] += time.thread_time_ns() - t
    for f, ns in spent.items():
        print("%s_ns %d" % (f.__name__, ns))


main(float(sys.argv[1]) if len(sys.argv) > 1 else 10)
