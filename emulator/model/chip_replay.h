/* SPDX-License-Identifier: MIT */
/*
 * Replay of a core's engine work (CORE_REPLAY_*, docs/engines.md "Replay"): a
 * simulation-speed device of performance mode, not a hardware unit. Firmware that is about
 * to run the same work again (a layer of the same shapes) may instead tell the chip to add
 * the counters of a recorded run of it: BEGIN and END snapshot this core's engine counters
 * into a slot, REPEAT adds COUNT times the difference. The hart then waits out the recorded
 * chip time itself (a TIMER wait), so the clock stays the chip's.
 *
 * Added: busy time, FLOPs, bytes moved, vector elements and ALU operations, SRAM, HBM and
 * NoC bytes: everything the energy and the reports derive from. Not added: descriptors
 * (the count stays what the emulator executed) and refused descriptors. Not modelled: the
 * repeated work's NoC and HBM contention with other cores (it sleeps; the others, running
 * the same program, replay too), and its data (refused in functional mode).
 */
#ifndef CHIP_REPLAY_H
#define CHIP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "chip_engines.h"

struct chip_replay_slot {
    struct chip_engine_counters begin[NPU_ENGINE_COUNT], end[NPU_ENGINE_COUNT];
    bool begun, ended;
};

struct chip_replay {
    uint32_t ncores;
    struct chip_replay_slot *slots; /* [core * NPU_REPLAY_SLOTS + slot] */
};

int chip_replay_init(struct chip_replay *r, uint32_t ncores);
void chip_replay_destroy(struct chip_replay *r);

/*
 * Command from core `core`: npu_replay_op `op` on `slot` (count: REPEAT's repetitions).
 * NPU_ERR_STATE in functional mode, with descriptors pending on the core, for END without
 * BEGIN, REPEAT of an unfinished slot (a REPEAT while another slot is being recorded counts
 * in that slot: nested records);
 * NPU_ERR_RANGE for a bad core, slot or count, or repeated counters that would overflow;
 * NPU_ERR_INVAL for an unknown op. `err` says which. The chip trusts the firmware to
 * sleep the repeated time (a device for simulation speed, not a hardware unit).
 */
int chip_replay_apply_op(struct chip_replay *r, struct chip_engines *e, uint32_t core,
                         uint32_t op, uint32_t slot, uint32_t count, char *err, size_t errlen);

#endif
