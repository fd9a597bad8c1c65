// A program outside the tinyfuse tree: finds the installed package and trains a tiny model.
#include <tinyfuse/tinyfuse.h>
#include <cstdio>
int main() {
  using namespace tinyfuse;
  json cfg = {{"loss", {{"otype", "L2"}}}, {"optimizer", {{"otype", "Adam"}}},
              {"network", {{"otype", "PortableMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}}};
  Model m = create_from_config(2, 1, cfg);
  std::vector<float> x(64, 0.5f), y(32, 1.0f);
  float l0 = m.trainer->training_step(TensorView::matrix(x.data(), 32, 2), TensorView::matrix(y.data(), 32, 1));
  for (int i = 0; i < 50; ++i) m.trainer->training_step(TensorView::matrix(x.data(), 32, 2), TensorView::matrix(y.data(), 32, 1));
  float l1 = m.trainer->last_loss();
  std::printf("loss %g -> %g\n", l0, l1);
  return l1 < l0 ? 0 : 1;
}
