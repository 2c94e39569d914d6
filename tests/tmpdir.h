// tmpdir.h — a fresh temporary directory for each test that asks for one (cmocka setup and teardown:
// cmocka_unit_test_setup_teardown(test, make_tmp, remove_tmp)); tmpdir_ holds its path meanwhile.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

static char tmpdir_[64];

static int make_tmp(void **state) {
    (void)state;
    snprintf(tmpdir_, sizeof tmpdir_, "/tmp/pm_test_XXXXXX");
    return mkdtemp(tmpdir_) ? 0 : -1;
}

static int remove_tmp(void **state) {
    (void)state;
    if (pm_remove_tree(tmpdir_) != 0) printf("warning: %s\n", pm_last_error());
    return 0;
}
