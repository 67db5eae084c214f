/* SPDX-License-Identifier: MIT */
/* The adversary image's shared constants (adv_ctrl.c, adv_core.c). */
#ifndef ADV_H
#define ADV_H

#define ADV_SEM_DONE 5u /* on the control core: cores done */

#endif
