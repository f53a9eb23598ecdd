// tile_schedule.cuh: how the streaming kernels (vector.cu, vector_bulk.cu) deal the tiles of a vector to blocks.
//
// Tiles are dealt in runs of `run` contiguous tiles, runs handed out round-robin: run r goes to block r % gridDim.x.
// The launcher picks the layout (suite/streaming.py): run = 1 with a persistent grid (block b streams tiles b,
// b + grid, ...), or run = r with one run per block (short runs, blocks come and go).
#pragma once

// This block's tiles, in order. The tile index only grows, so "tile >= num_tiles" means this block is done.
struct TileCursor {
    long long tile;    // current tile (may be past the end)
    int left_in_run;   // tiles left in the current run, this one included
    int run;           // tiles per run
    long long jump;    // from the last tile of a run to the first of this block's next run

    __device__ explicit TileCursor(int run_tiles)
        : tile((long long)blockIdx.x * run_tiles),
          left_in_run(run_tiles),
          run(run_tiles),
          jump((long long)(gridDim.x - 1) * run_tiles + 1) {}

    __device__ void advance() {
        if (--left_in_run == 0) {
            left_in_run = run;
            tile += jump;
        } else {
            ++tile;
        }
    }
};
