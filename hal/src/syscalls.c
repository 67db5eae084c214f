/* SPDX-License-Identifier: MIT */
/*
 * newlib system calls: console output through the hart's CON_TX register (the chip adds the
 * per-core prefix and prints whole lines), a heap inside the image (hal/ld/core.ld, ctrl.ld), exit.
 * There is no file system: open fails, reads return end of file.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "npu/hal.h"
#include "npu/mmio.h"

/* newlib's prototypes for these come from its internal headers; declare them here. */
int _write(int fd, const void *buf, int len);
int _read(int fd, void *buf, int len);
int _close(int fd);
int _fstat(int fd, struct stat *st);
int _isatty(int fd);
int _lseek(int fd, int off, int whence);
int _kill(int pid, int sig);
int _getpid(void);
int _open(const char *path, int flags, int mode);
void *_sbrk(ptrdiff_t incr);
void _exit(int status) __attribute__((noreturn));
void __assert_func(const char *file, int line, const char *func, const char *expr)
    __attribute__((noreturn));

extern char __heap_start[], __heap_end[];
static char *heap_top;

void hal_console_write(const char *buf, uint32_t len)
{
    uintptr_t tx = hal_self()->regs_base + CORE_CON_TX_OFFSET;
    for (uint32_t i = 0; i < len; i++)
        mmio_write32(tx, (uint8_t)buf[i]);
}

void hal_console_puts(const char *s)
{
    uint32_t n = 0;
    while (s[n])
        n++;
    hal_console_write(s, n);
}

void hal_console_put_hex(uint64_t value)
{
    char buf[19] = "0x";
    int n = 2;
    for (int shift = 60; shift >= 0; shift -= 4) {
        unsigned d = (value >> shift) & 0xf;
        if (d || n > 2 || shift == 0)
            buf[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    }
    hal_console_write(buf, (uint32_t)n);
}

void hal_console_put_dec(uint64_t value)
{
    char buf[20];
    int n = sizeof(buf);
    do {
        buf[--n] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    hal_console_write(buf + n, (uint32_t)(sizeof(buf) - n));
}

void hal_console_put_self(void)
{
    const struct hal_core_info *self = hal_self();
    if (self->is_ctrl) {
        hal_console_puts("control core");
        return;
    }
    hal_console_puts("core ");
    hal_console_put_dec(self->core_id);
    hal_console_puts(" (");
    hal_console_put_dec(self->row);
    hal_console_puts(",");
    hal_console_put_dec(self->col);
    hal_console_puts(")");
}

void hal_exit(int status)
{
    if (hal_self()->is_ctrl) {
        uint32_t code = (uint32_t)status & 0xff;
        mmio_write32(hal_chip()->exit_base, code ? (code << 16) | 0x3333 : 0x5555);
    } else {
        mmio_write32(hal_self()->regs_base + CORE_EXIT_OFFSET, (uint32_t)status & 0xff);
    }
    for (;;)
        __asm__ volatile("wfi" ::: "memory"); /* finished: no wake-up will come */
}

int _write(int fd, const void *buf, int len)
{
    if (fd != 1 && fd != 2) {
        errno = EBADF;
        return -1;
    }
    hal_console_write(buf, (uint32_t)len);
    return len;
}

int _read(int fd, void *buf, int len)
{
    (void)fd, (void)buf, (void)len;
    return 0;
}

int _open(const char *path, int flags, int mode)
{
    (void)path, (void)flags, (void)mode;
    errno = ENOENT;
    return -1;
}

int _close(int fd)
{
    (void)fd;
    return -1;
}

int _fstat(int fd, struct stat *st)
{
    (void)fd;
    st->st_mode = S_IFCHR;
    return 0;
}

int _isatty(int fd)
{
    return fd >= 0 && fd <= 2;
}

int _lseek(int fd, int off, int whence)
{
    (void)fd, (void)off, (void)whence;
    return 0;
}

int _kill(int pid, int sig)
{
    (void)pid, (void)sig;
    errno = EINVAL;
    return -1;
}

int _getpid(void)
{
    return 1;
}

void *_sbrk(ptrdiff_t incr)
{
    if (!heap_top)
        heap_top = __heap_start;
    if (incr > __heap_end - heap_top || incr < __heap_start - heap_top) {
        errno = ENOMEM;
        return (void *)-1;
    }
    char *prev = heap_top;
    heap_top += incr;
    return prev;
}

void _exit(int status)
{
    hal_exit(status);
}

/* newlib's assert(): report like a trap (raw writer, names the core), end with ASSERT. */
void __assert_func(const char *file, int line, const char *func, const char *expr)
{
    hal_console_puts("\nFATAL: ");
    hal_console_put_self();
    hal_console_puts(" assertion failed: ");
    hal_console_puts(expr);
    hal_console_puts(" in ");
    hal_console_puts(func ? func : "?");
    hal_console_puts("() at ");
    hal_console_puts(file);
    hal_console_puts(":");
    hal_console_put_dec((uint64_t)line);
    hal_console_puts("\n");
    hal_exit(NPU_EXIT_ASSERT);
}
