/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * npu-mesh exit device: the run's status code out of QEMU.
 *
 * Same protocol as QEMU's sifive,test0 finisher, so generic bare-metal code works: a 32-bit
 * write of 0x5555 means "pass" (status 0), (code << 16) | 0x3333 means "fail with code".
 * The writing hart finishes with that status; the chip stops at the next quiescent point
 * (see npu_chipctl.c), so whatever the other harts print before that is kept, in chip order.
 */
#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "hw/qdev-properties.h"

#include "npu_mesh.h"

enum { EXIT_PASS = 0x5555, EXIT_FAIL = 0x3333 };

static uint64_t exit_read(void *opaque, hwaddr addr, unsigned size)
{
    return 0;
}

static void exit_write(void *opaque, hwaddr addr, uint64_t value, unsigned size)
{
    NpuExitState *s = opaque;
    NpuChipctlState *chip = s->chip;
    int hart = npu_chip_current_hart(chip);
    uint32_t kind = value & 0xffff, code = (value >> 16) & 0xff;

    if (chip->stopped) {
        return;
    }
    if (addr != 0 || hart < 0 || (kind != EXIT_PASS && kind != EXIT_FAIL)) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh exit: write of 0x%" PRIx64 " at offset 0x%"
                      HWADDR_PRIx " by hart %d; expected 0x5555 or (code << 16) | 0x3333 "
                      "at offset 0\n", value, addr, hart);
        return;
    }
    if (chip->clock.harts[hart].state != CHIP_HART_RUNNING) {
        return;
    }
    npu_chip_hart_exit(chip, hart, kind == EXIT_PASS ? 0 : (code ? code : NPU_EXIT_FAIL));
}

static const MemoryRegionOps exit_ops = {
    .read = exit_read,
    .write = exit_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
};

static void exit_realize(DeviceState *dev, Error **errp)
{
    NpuExitState *s = NPU_EXIT(dev);

    if (!s->chip) {
        error_setg(errp, "npu-mesh exit: property 'chip' not set");
        return;
    }
    memory_region_init_io(&s->mmio, OBJECT(dev), &exit_ops, s, TYPE_NPU_EXIT,
                          npu_memmap[NPU_MAP_EXIT].size);
    sysbus_init_mmio(SYS_BUS_DEVICE(dev), &s->mmio);
}

static Property exit_props[] = {
    DEFINE_PROP_LINK("chip", NpuExitState, chip, TYPE_NPU_CHIPCTL, NpuChipctlState *),
    DEFINE_PROP_END_OF_LIST(),
};

static void exit_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);

    dc->realize = exit_realize;
    dc->user_creatable = false;
    device_class_set_props(dc, exit_props);
}

static const TypeInfo exit_info = {
    .name = TYPE_NPU_EXIT,
    .parent = TYPE_SYS_BUS_DEVICE,
    .instance_size = sizeof(NpuExitState),
    .class_init = exit_class_init,
};

static void exit_register_types(void)
{
    type_register_static(&exit_info);
}

type_init(exit_register_types)
