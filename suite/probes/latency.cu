// latency.cu: the idle latency of a global-memory load, by a pointer chase.
//
// One thread follows a cycle through a buffer of 128-byte lines: each load's address is the value the previous load
// returned, so exactly one load is in flight at any time and the time per step is the latency of one load. The host
// (latency.py) lays the cycle out so that every step touches a line not touched before (an L2 miss: the buffer is
// far larger than L2 and flushed first) and visits the lines of each 2 MiB region in random order before moving to
// the next region (a DRAM row miss per step, without a TLB miss per step: the streaming kernels this latency is
// compared with walk memory in order).

constexpr int CHASE_LINE_WORDS = 32;  // 128-byte lines of 32-bit words; word 0 of a line holds the next line's index

__global__ void pointer_chase(const unsigned* next, long long steps, unsigned first_line, unsigned* last_line) {
    unsigned line = first_line;
    for (long long i = 0; i < steps; ++i) line = next[(unsigned long long)line * CHASE_LINE_WORDS];
    *last_line = line;  // the result depends on every load: nothing can be skipped
}
