/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the deterministic chip console (emulator/model/chip_console.[ch]).
 * Covers: lines are held back until chip_console_flush and then come out ordered by
 * (time, hart, seq) whatever the interleaving of putc calls; the exact prefix
 * "[%8llu.%06llu us %-10s] " with core names cN(row,col) and "ctrl" for the last hart;
 * lines longer than CHIP_CONSOLE_LINE_MAX are split; '\r' is dropped; empty lines;
 * chip_console_end_line flushes a partial line (and only a partial one); bad hart numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip_console.h"
#include "npu_enums.h"

#define OUT_MAX 8192u

struct sink {
    char text[OUT_MAX];
    size_t len;
    unsigned nemits;
};

static void emit(void *opaque, const char *text, size_t len)
{
    struct sink *s = opaque;
    assert_true(len > 0);
    assert_int_equal(text[len - 1], '\n'); /* one whole line per call */
    assert_null(memchr(text, '\n', len - 1));
    assert_true(s->len + len < OUT_MAX);
    memcpy(s->text + s->len, text, len);
    s->len += len;
    s->text[s->len] = '\0';
    s->nemits++;
}

/* A 2x2 mesh: harts 0..3 are cores, hart 4 the control core. */
static void console_init(struct chip_console *con, struct sink *s)
{
    memset(s, 0, sizeof(*s));
    assert_int_equal(chip_console_init(con, 5, 2, emit, s), NPU_OK);
}

static void put_str(struct chip_console *con, uint32_t hart, uint64_t t, const char *str)
{
    for (; *str; str++)
        assert_int_equal(chip_console_putc(con, hart, t, *str), NPU_OK);
}

static void test_held_until_flush(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    put_str(&con, 1, 5000, "hello\n");
    assert_int_equal(s.nemits, 0);
    assert_int_equal(con.npending, 1);
    chip_console_flush(&con);
    assert_int_equal(s.nemits, 1);
    assert_string_equal(s.text, "[       0.005000 us c1(0,1)   ] hello\n");
    assert_int_equal(con.npending, 0);
    chip_console_flush(&con); /* nothing left */
    assert_int_equal(s.nemits, 1);
    chip_console_destroy(&con);
}

static const char expected_interleaved[] =
    "[       0.001000 us ctrl      ] ctl\n"
    "[       0.003000 us c0(0,0)   ] zero\n"
    "[       0.003000 us c1(0,1)   ] one\n"
    "[       0.003000 us c2(1,0)   ] two\n"
    "[       0.005000 us c3(1,1)   ] first\n"
    "[       0.005000 us c3(1,1)   ] second\n"
    "[       0.007000 us c0(0,0)   ] late\n";

/* Writes the lines of expected_interleaved, one byte at a time in the given hart order. */
static void write_interleaved(struct chip_console *con, const uint32_t *order, size_t n)
{
    static const char *text[5] = { "zero\nlate\n", "one\n", "two\n", "first\nsecond\n",
                                   "ctl\n" };
    static const uint64_t t0[5] = { 3000, 3000, 3000, 5000, 1000 };
    size_t pos[5] = { 0 };
    for (size_t i = 0; i < n; i++) {
        uint32_t h = order[i];
        if (text[h][pos[h]] == '\0')
            continue;
        /* Hart 0's second line is written at a later local time. */
        uint64_t t = h == 0 && pos[h] >= 5 ? 7000 : t0[h];
        assert_int_equal(chip_console_putc(con, h, t, text[h][pos[h]++]), NPU_OK);
    }
    for (uint32_t h = 0; h < 5; h++)
        assert_int_equal(text[h][pos[h]], '\0');
}

static void test_ordered_by_time_hart_seq(void **state)
{
    (void)state;
    enum { TAIL = 5 * 14, NRAND = 200 };
    static uint32_t orders[3][NRAND + TAIL];
    const size_t count[3] = { TAIL, TAIL, NRAND + TAIL };
    /* Order 0: hart by hart, last hart first. Order 1: round robin. Order 2: LCG, then hart
     * by hart to finish whatever the random part left. */
    for (size_t i = 0; i < TAIL; i++) {
        orders[0][i] = 4 - (uint32_t)(i / 14);
        orders[1][i] = (uint32_t)(i % 5);
        orders[2][NRAND + i] = (uint32_t)(i / 14);
    }
    uint32_t lcg = 42;
    for (size_t i = 0; i < NRAND; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        orders[2][i] = (lcg >> 16) % 5;
    }
    for (int k = 0; k < 3; k++) {
        struct chip_console con;
        struct sink s;
        console_init(&con, &s);
        write_interleaved(&con, orders[k], count[k]);
        assert_int_equal(s.nemits, 0);
        chip_console_flush(&con);
        assert_string_equal(s.text, expected_interleaved);
        assert_int_equal(s.nemits, 7);
        chip_console_destroy(&con);
    }
}

static void test_prefix_format(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    memset(&s, 0, sizeof(s));
    /* A 4x4 mesh: hart 13 is core (3,1), hart 16 the control core. */
    assert_int_equal(chip_console_init(&con, 17, 4, emit, &s), NPU_OK);
    put_str(&con, 13, 1234567890ull, "x\n");
    put_str(&con, 16, 0, "boot\n");
    put_str(&con, 15, 123456789012345678ull, "big\n");
    put_str(&con, 0, 999999, "y\n");
    chip_console_flush(&con);
    assert_string_equal(s.text,
                        "[       0.000000 us ctrl      ] boot\n"
                        "[       0.999999 us c0(0,0)   ] y\n"
                        "[    1234.567890 us c13(3,1)  ] x\n"
                        "[123456789012.345678 us c15(3,3)  ] big\n");
    chip_console_destroy(&con);
}

static void test_long_lines_split(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    char a[CHIP_CONSOLE_LINE_MAX + 1];
    memset(a, 'a', CHIP_CONSOLE_LINE_MAX);
    a[CHIP_CONSOLE_LINE_MAX] = '\0';
    put_str(&con, 2, 1000000, a);
    put_str(&con, 2, 1000000, "bbb\n");
    /* Exactly CHIP_CONSOLE_LINE_MAX characters then '\n': one line, no empty one. */
    put_str(&con, 3, 2000000, a);
    put_str(&con, 3, 2000000, "\n");
    chip_console_flush(&con);
    char want[4 * CHIP_CONSOLE_LINE_MAX];
    snprintf(want, sizeof(want),
             "[       1.000000 us c2(1,0)   ] %s\n"
             "[       1.000000 us c2(1,0)   ] bbb\n"
             "[       2.000000 us c3(1,1)   ] %s\n", a, a);
    assert_string_equal(s.text, want);
    assert_int_equal(s.nemits, 3);
    chip_console_destroy(&con);
}

static void test_split_piece_keeps_its_time(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    /* 240 bytes at 1 us, then byte 241 at 3 us cuts the line: the cut piece is keyed at
     * 3 us; core 1's line at 2 us comes before it. */
    for (unsigned i = 0; i < CHIP_CONSOLE_LINE_MAX; i++)
        assert_int_equal(chip_console_putc(&con, 0, 1000000, 'z'), NPU_OK);
    put_str(&con, 0, 3000000, "q\n");
    put_str(&con, 1, 2000000, "mid\n");
    chip_console_flush(&con);
    char z[CHIP_CONSOLE_LINE_MAX + 1], want[2 * CHIP_CONSOLE_LINE_MAX];
    memset(z, 'z', CHIP_CONSOLE_LINE_MAX);
    z[CHIP_CONSOLE_LINE_MAX] = '\0';
    snprintf(want, sizeof(want),
             "[       2.000000 us c1(0,1)   ] mid\n"
             "[       3.000000 us c0(0,0)   ] %s\n"
             "[       3.000000 us c0(0,0)   ] q\n", z);
    assert_string_equal(s.text, want);
    chip_console_destroy(&con);
}

static void test_carriage_return_dropped(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    put_str(&con, 4, 2000, "a\r\nb\rc\r\n\r\n");
    chip_console_flush(&con);
    assert_string_equal(s.text,
                        "[       0.002000 us ctrl      ] a\n"
                        "[       0.002000 us ctrl      ] bc\n"
                        "[       0.002000 us ctrl      ] \n");
    chip_console_destroy(&con);
}

static void test_end_line_flushes_partial(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    put_str(&con, 1, 1000, "no newline");
    chip_console_flush(&con);
    assert_int_equal(s.nemits, 0); /* a partial line is not printed */
    assert_int_equal(chip_console_end_line(&con, 1, 4000), NPU_OK);
    assert_int_equal(chip_console_end_line(&con, 1, 5000), NPU_OK); /* nothing more */
    assert_int_equal(chip_console_end_line(&con, 2, 5000), NPU_OK); /* nothing at all */
    chip_console_flush(&con);
    assert_string_equal(s.text, "[       0.004000 us c1(0,1)   ] no newline\n");
    assert_int_equal(s.nemits, 1);
    /* The hart starts a fresh line afterwards. */
    put_str(&con, 1, 6000, "next\n");
    chip_console_flush(&con);
    assert_string_equal(s.text, "[       0.004000 us c1(0,1)   ] no newline\n"
                                "[       0.006000 us c1(0,1)   ] next\n");
    chip_console_destroy(&con);
}

static void test_bad_hart(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    assert_int_equal(chip_console_putc(&con, 5, 0, 'x'), NPU_ERR_RANGE);
    assert_int_equal(chip_console_putc(&con, 1000, 0, '\n'), NPU_ERR_RANGE);
    assert_int_equal(chip_console_end_line(&con, 5, 0), NPU_ERR_RANGE);
    assert_int_equal(con.npending, 0);
    chip_console_flush(&con);
    assert_int_equal(s.nemits, 0);
    chip_console_destroy(&con);
}

static void test_many_lines_grow_pending(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    /* 150 lines in reverse time order; they come out in time order. */
    for (unsigned i = 0; i < 150; i++) {
        char line[16];
        snprintf(line, sizeof(line), "%u\n", 149 - i);
        put_str(&con, i % 4, (uint64_t)(149 - i) * 1000000, line);
    }
    assert_int_equal(con.npending, 150);
    chip_console_flush(&con);
    assert_int_equal(s.nemits, 150);
    const char *p = s.text;
    for (unsigned i = 0; i < 150; i++) {
        char want[64];
        unsigned hart = (149 - i) % 4;
        snprintf(want, sizeof(want), "[%8u.000000 us c%u(%u,%u)   ] %u\n", i, hart, hart / 2,
                 hart % 2, i);
        assert_memory_equal(p, want, strlen(want));
        p += strlen(want);
    }
    assert_int_equal(*p, '\0');
    chip_console_destroy(&con);
}

/* After a clock step to T only lines stamped before T are final; later ones wait. */
static void test_flush_before_keeps_later_lines(void **state)
{
    (void)state;
    struct chip_console con;
    struct sink s;
    console_init(&con, &s);
    put_str(&con, 0, 500, "ahead\n");  /* hart 0 ran ahead with its own commands */
    put_str(&con, 1, 100, "early\n");
    chip_console_flush_before(&con, 300);
    assert_int_equal(s.nemits, 1);
    assert_non_null(strstr(s.text, "early"));
    put_str(&con, 2, 300, "next step\n"); /* a hart woken at 300 */
    chip_console_flush(&con);
    assert_int_equal(s.nemits, 3);
    const char *a = strstr(s.text, "next step"), *b = strstr(s.text, "ahead");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b); /* 300 before 500, though "ahead" was queued first */
    chip_console_destroy(&con);
}

static void count_emit(void *opaque, const char *text, size_t len)
{
    (void)text, (void)len;
    (*(unsigned *)opaque)++;
}

/* A hart printing in a loop between two steps has the excess dropped, with one notice. */
static void test_lines_per_step_capped(void **state)
{
    (void)state;
    struct chip_console con;
    unsigned n = 0;
    assert_int_equal(chip_console_init(&con, 5, 2, count_emit, &n), NPU_OK);
    for (unsigned i = 0; i < CHIP_CONSOLE_HART_LINES + 10; i++)
        assert_int_equal(chip_console_putc(&con, 3, 0, '\n'), NPU_OK);
    assert_int_equal(chip_console_putc(&con, 4, 0, '\n'), NPU_OK); /* others unaffected */
    chip_console_flush_before(&con, 1);
    assert_int_equal(n, CHIP_CONSOLE_HART_LINES + 1 + 1);
    n = 0;
    assert_int_equal(chip_console_putc(&con, 3, 1, '\n'), NPU_OK); /* a new step: kept */
    chip_console_flush(&con);
    assert_int_equal(n, 1);
    chip_console_destroy(&con);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_before_keeps_later_lines),
        cmocka_unit_test(test_lines_per_step_capped),
        cmocka_unit_test(test_held_until_flush),
        cmocka_unit_test(test_ordered_by_time_hart_seq),
        cmocka_unit_test(test_prefix_format),
        cmocka_unit_test(test_long_lines_split),
        cmocka_unit_test(test_split_piece_keeps_its_time),
        cmocka_unit_test(test_carriage_return_dropped),
        cmocka_unit_test(test_end_line_flushes_partial),
        cmocka_unit_test(test_bad_hart),
        cmocka_unit_test(test_many_lines_grow_pending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
