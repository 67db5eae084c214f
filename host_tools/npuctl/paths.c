/* SPDX-License-Identifier: MIT */
/*
 * npuctl paths: the source, build and firmware directories and the QEMU binary (compiled in,
 * overridable by environment variables), chip config files and firmware image pairs.
 *
 * An image NAME is the directory FIRMWARE_DIR/NAME/ holding ctrl.elf (control core) and
 * core.elf (NPU cores); a NAME containing '/' is taken as that directory itself.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npu_enums.h"

#ifndef NPU_SOURCE_DIR
#define NPU_SOURCE_DIR "."
#endif
#ifndef NPU_BUILD_DIR
#define NPU_BUILD_DIR "build"
#endif
#ifndef NPU_QEMU_PATH
#define NPU_QEMU_PATH NPU_BUILD_DIR "/emulator/qemu-system-riscv64"
#endif
#ifndef NPU_FIRMWARE_DIR
#define NPU_FIRMWARE_DIR NPU_BUILD_DIR "/firmware/images"
#endif

struct dir_desc {
    const char *env;
    const char *compiled;
};

static const struct dir_desc dirs[] = {
    [NPUCTL_DIR_SOURCE] = { "NPU_SOURCE_DIR", NPU_SOURCE_DIR },
    [NPUCTL_DIR_BUILD] = { "NPU_BUILD_DIR", NPU_BUILD_DIR },
    [NPUCTL_DIR_FIRMWARE] = { "NPU_FIRMWARE_DIR", NPU_FIRMWARE_DIR },
    [NPUCTL_PATH_QEMU] = { "NPU_QEMU", NPU_QEMU_PATH },
};

const char *npuctl_get_dir(enum npuctl_dir which)
{
    const char *v = getenv(dirs[which].env);
    return v && *v ? v : dirs[which].compiled;
}

const char *npuctl_dir_env_name(enum npuctl_dir which)
{
    return dirs[which].env;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool npuctl_chip_is_path(const char *chip)
{
    return strchr(chip, '/') != NULL || ends_with(chip, ".toml");
}

static int join_path(char *out, size_t outlen, const char *what, char *err, size_t errlen,
                     const char *fmt, const char *a, const char *b)
{
    int n = snprintf(out, outlen, fmt, a, b);
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "%s: path too long", what);
        return NPU_ERR_RANGE;
    }
    return NPU_OK;
}

int npuctl_resolve_chip_path(const char *chip, const char *source_dir, char *path,
                             size_t pathlen, char *err, size_t errlen)
{
    if (npuctl_chip_is_path(chip))
        return join_path(path, pathlen, "--chip", err, errlen, "%s%s", chip, "");
    return join_path(path, pathlen, "--chip", err, errlen, "%s/models/chips/%s.toml",
                     source_dir, chip);
}

/* Writes the image names found in firmware_dir ("a, b" or "none") into out. */
static void list_images(const char *firmware_dir, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    DIR *d = opendir(firmware_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char ctrl[NPUCTL_PATH_MAX];
            if (e->d_name[0] == '.')
                continue;
            snprintf(ctrl, sizeof(ctrl), "%s/%s/ctrl.elf", firmware_dir, e->d_name);
            if (access(ctrl, F_OK) != 0 || used + strlen(e->d_name) + 3 >= outlen)
                continue;
            used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? ", " : "",
                                     e->d_name);
        }
        closedir(d);
    }
    if (used == 0)
        snprintf(out, outlen, "none");
}

/* A readable regular file, or a message naming it and what is wrong. */
static int check_file(const char *what, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e == ENOENT)
            snprintf(err, errlen, "%s: missing file %s", what, path);
        else
            snprintf(err, errlen, "%s: cannot access %s: %s", what, path, strerror(e));
        return e == ENOENT ? NPU_ERR_NOTFOUND : NPU_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: %s is not a regular file", what, path);
        return NPU_ERR_INVAL;
    }
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "%s: cannot read %s: %s", what, path, strerror(errno));
        return NPU_ERR_IO;
    }
    return NPU_OK;
}

static int resolve_named_image(const char *name, const char *firmware_dir,
                               struct npuctl_files *files, char *err, size_t errlen)
{
    char dir[NPUCTL_PATH_MAX], what[NPUCTL_PATH_MAX + 16];
    int rc;
    if (strchr(name, '/'))
        rc = join_path(dir, sizeof(dir), "image", err, errlen, "%s%s", name, "");
    else
        rc = join_path(dir, sizeof(dir), "image", err, errlen, "%s/%s", firmware_dir, name);
    if (rc)
        return rc;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        char avail[512];
        list_images(firmware_dir, avail, sizeof(avail));
        snprintf(err, errlen, "image '%s': no directory %s (images in %s: %s)", name, dir,
                 firmware_dir, avail);
        return NPU_ERR_NOTFOUND;
    }
    snprintf(what, sizeof(what), "image '%s'", name);
    if ((rc = join_path(files->ctrl_elf, sizeof(files->ctrl_elf), what, err, errlen,
                        "%s/%s", dir, "ctrl.elf")) ||
        (rc = join_path(files->core_elf, sizeof(files->core_elf), what, err, errlen,
                        "%s/%s", dir, "core.elf")))
        return rc;
    if ((rc = check_file(what, files->ctrl_elf, err, errlen)))
        return rc;
    return check_file(what, files->core_elf, err, errlen);
}

int npuctl_resolve_images(const struct npuctl_run_opts *opts, const char *firmware_dir,
                          struct npuctl_files *files, char *err, size_t errlen)
{
    if (opts->image)
        return resolve_named_image(opts->image, firmware_dir, files, err, errlen);
    int rc;
    if ((rc = join_path(files->ctrl_elf, sizeof(files->ctrl_elf), "CTRL.elf", err, errlen,
                        "%s%s", opts->ctrl_elf, "")) ||
        (rc = join_path(files->core_elf, sizeof(files->core_elf), "CORE.elf", err, errlen,
                        "%s%s", opts->core_elf, "")))
        return rc;
    if ((rc = check_file("control-core image (CTRL.elf)", files->ctrl_elf, err, errlen)))
        return rc;
    return check_file("NPU-core image (CORE.elf)", files->core_elf, err, errlen);
}
