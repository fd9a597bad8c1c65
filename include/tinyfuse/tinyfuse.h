// Umbrella header: everything a user of the C++ API needs.
#pragma once

#include "tinyfuse/activation.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/checkpoint.h"
#include "tinyfuse/common.h"
#include "tinyfuse/encoding.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/loss.h"
#include "tinyfuse/network.h"
#include "tinyfuse/object.h"
#include "tinyfuse/optimizer.h"
#include "tinyfuse/random.h"
#include "tinyfuse/tensor.h"
#include "tinyfuse/trainer.h"
