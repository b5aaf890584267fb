"""Graph-replay timing for launches of a few tens of microseconds (decode).

triton's do_bench records a pair of events around every call, and its median sits 11-14 us above
the sum of the kernels for every backend (docs/perf-notes.md §12.1): a fifth of a 50 us decode
step. Serving stacks run decode steps inside CUDA graphs; timing `calls` launches captured in one
graph and dividing by their number counts the kernels and the gaps between them, not the host.
Consecutive calls read different input sets when several are given, so a K/V cache smaller than
a few L2s is not served from L2 by the previous call.
"""


def graph_ms(torch, builders, calls=24, trials=15):
    """Median milliseconds per launch over `trials` replays of one graph of `calls` launches.

    builders: callables returning a launch function; they are called on the capturing stream
    (a flashjit launch binds the stream that is current when it is prepared), one per input set,
    and the graph calls their launches in turn."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch's capture requires
        for build in builders:
            build()()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launches = [build() for build in builders]
        for i in range(calls):
            launches[i % len(launches)]()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    times.sort()
    return times[len(times) // 2]


def input_sets(nbytes, floor=256e6):
    """How many input sets make `calls` in turn read at least `floor` bytes (H200 L2: 50 MB)
    before reading a set again; at least 2."""
    return max(2, -(-int(floor) // max(1, int(nbytes))))
