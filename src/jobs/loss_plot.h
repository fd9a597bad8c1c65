// A picture of the training loss: log-scale y axis with decade ticks, steps on the x axis.
#pragma once

#include <vector>

#include "jobs/image.h"

namespace tinyfuse::jobs {

// losses[i] is the loss of step i + 1. Draws each step's loss in a light colour and a running
// mean (in log space) over it in a dark one; values that are not finite and positive are skipped.
Image render_loss_plot(const std::vector<float>& losses, int width = 800, int height = 480);

}  // namespace tinyfuse::jobs
