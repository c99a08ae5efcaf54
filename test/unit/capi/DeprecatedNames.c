/*===- DeprecatedNames.c - lina_c.h's old names of the mma knob ---------===//
 *
 * Part of lina. Before the schedule's `mma` knob had its name it was
 * `wgmma` (lina_wgmma, LINA_WGMMA_DEFAULT/OFF/ON, the field `wgmma`): those
 * names still compile for one release, deprecated, and mean the new ones.
 * Compiled as C with the deprecation warning silenced (CMakeLists.txt);
 * capi-header-deprecates-old-names compiles it again and looks for the
 * warnings. DeprecatedNamesTest.cpp calls these.
 *
 *===----------------------------------------------------------------------===*/
#include "lina/lina_c.h"

/* Designated initializers by either name set the one field. */
int lina_test_wgmma_field_is_mma(void) {
  lina_schedule old = {.segments = 2, .wgmma = LINA_WGMMA_ON};
  lina_schedule now = {.segments = 2, .mma = LINA_MMA_WARPGROUP};
  lina_schedule off = {.wgmma = LINA_WGMMA_OFF};
  return old.mma == LINA_MMA_WARPGROUP && now.wgmma == LINA_WGMMA_ON &&
         old.segments == 2 && off.mma == LINA_MMA_WARP;
}

/* A field written by one name reads the same by the other. */
int lina_test_wgmma_writes_mma(void) {
  lina_schedule s = {0};
  s.wgmma = LINA_WGMMA_ON;
  if (s.mma != LINA_MMA_WARPGROUP)
    return 0;
  s.mma = LINA_MMA_WARP;
  return s.wgmma == LINA_WGMMA_OFF;
}

/* The old enumerators are the new values, and the old type is the new. */
int lina_test_wgmma_enumerators(void) {
  lina_wgmma old = LINA_WGMMA_DEFAULT;
  lina_mma *now = &old;
  return *now == LINA_MMA_DEFAULT && LINA_WGMMA_OFF == LINA_MMA_WARP &&
         LINA_WGMMA_ON == LINA_MMA_WARPGROUP &&
         sizeof(lina_wgmma) == sizeof(lina_mma);
}
