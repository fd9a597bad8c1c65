"""tinyfuse.tcnn.FusedTrainer: the C++ Trainer's step on a module's parameters, checked against
autograd through plain PyTorch ops (CPU), and on CUDA against the same step on the CPU."""
import pytest
import torch

import tinyfuse
import tinyfuse.tcnn as tcnn
from conftest import pure_torch_mlp

MLP = {"otype": "PortableMLP", "activation": "Tanh", "output_activation": "None", "n_neurons": 16,
       "n_hidden_layers": 2}
GRID = {"otype": "HashGrid", "n_levels": 8, "n_features_per_level": 2, "log2_hashmap_size": 12,
        "base_resolution": 4, "per_level_scale": 1.5}
FUSED = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
         "n_hidden_layers": 2}


def sgd_reference(params, x, target, lr):
    """One SGD step with tiny-cuda-nn's L2 loss (mean over batch x outputs) through plain PyTorch
    ops in float64: (loss, new parameters)."""
    p = params.detach().double().requires_grad_()
    out = pure_torch_mlp(p, x.double(), 3, 2, 16, 2, "Tanh", "None")
    loss = ((out - target.double()) ** 2).mean()
    loss.backward()
    return loss.item(), (p - lr * p.grad).detach()


def test_sgd_steps_match_autograd_through_plain_pytorch():
    torch.manual_seed(0)
    net = tcnn.Network(3, 2, MLP, seed=5)
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "SGD", "learning_rate": 0.1})
    for step in range(3):
        x, target = torch.rand(256, 3), torch.rand(256, 2)
        loss_ref, params_ref = sgd_reference(net.params, x, target, 0.1)
        before = net.params.detach().clone()
        loss = trainer.step(x, target)
        assert isinstance(loss, float)
        assert loss == pytest.approx(loss_ref, rel=1e-5), step
        assert not torch.equal(net.params.detach(), before), step  # the module's params follow the trainer
        torch.testing.assert_close(net.params.detach().double(), params_ref, rtol=1e-5, atol=1e-6)


def test_parameters_changed_outside_are_taken_up():
    torch.manual_seed(1)
    net = tcnn.Network(3, 2, MLP, seed=6)
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "SGD", "learning_rate": 0.05})
    x, target = torch.rand(128, 3), torch.rand(128, 2)
    trainer.step(x, target)
    # In place, then by a new Parameter: the next step starts from those values.
    with torch.no_grad():
        net.params.mul_(0.5)
    _, expected = sgd_reference(net.params, x, target, 0.05)
    trainer.step(x, target)
    torch.testing.assert_close(net.params.detach().double(), expected, rtol=1e-5, atol=1e-6)
    net.params = torch.nn.Parameter(torch.rand(net.n_params) * 0.1)
    _, expected = sgd_reference(net.params, x, target, 0.05)
    trainer.step(x, target)
    torch.testing.assert_close(net.params.detach().double(), expected, rtol=1e-5, atol=1e-6)


def test_hash_grid_model_learns_with_adam_and_relative_l2():
    torch.manual_seed(2)
    model = tcnn.NetworkWithInputEncoding(2, 3, GRID, FUSED, seed=7)
    trainer = tcnn.FusedTrainer(model, {"otype": "RelativeL2"},
                                {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99})

    def field(x):  # a smooth colour field the model can learn
        return torch.stack([torch.sin(6 * x[:, 0]), torch.cos(4 * x[:, 1]), x[:, 0] * x[:, 1]], 1) * 0.5 + 0.5

    probe = torch.rand(1024, 2)
    before = ((model(probe).float() - field(probe)) ** 2).mean().item()
    losses = [trainer.step(x, field(x)) for x in (torch.rand(1024, 2) for _ in range(60))]
    after = ((model(probe).float() - field(probe)) ** 2).mean().item()
    assert losses[-1] < 0.2 * losses[0]
    assert after < 0.2 * before  # the module's own forward sees the trained parameters


def test_unchecked_steps_queue_and_loss_reads_the_last():
    torch.manual_seed(3)
    net = tcnn.Network(3, 2, MLP, seed=8)
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "SGD", "learning_rate": 0.1})
    x, target = torch.rand(64, 3), torch.rand(64, 2)
    loss_ref, params_ref = sgd_reference(net.params, x, target, 0.1)
    assert trainer.step(x, target, check=False) is None
    assert trainer.loss() == pytest.approx(loss_ref, rel=1e-5)
    torch.testing.assert_close(net.params.detach().double(), params_ref, rtol=1e-5, atol=1e-6)


def test_a_non_finite_batch_is_refused_with_parameters_unchanged():
    net = tcnn.Network(3, 2, MLP, seed=9)
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "SGD", "learning_rate": 0.1})
    x, target = torch.rand(64, 3), torch.rand(64, 2)
    trainer.step(x, target)
    before = net.params.detach().clone()
    target[5, 1] = float("nan")
    with pytest.raises(tinyfuse.Error, match="not|NaN|finite"):
        trainer.step(x, target)
    assert torch.equal(net.params.detach(), before)
    target[5, 1] = 0.5
    trainer.step(x, target)  # and the trainer goes on
    assert not torch.equal(net.params.detach(), before)


def test_a_graph_built_before_a_step_refuses_its_backward():
    net = tcnn.Network(3, 2, MLP, seed=10)
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "SGD", "learning_rate": 0.1})
    x = torch.rand(32, 3)
    out = net(x)
    trainer.step(x, torch.rand(32, 2))
    with pytest.raises(RuntimeError, match="inplace|in-place|modified"):
        out.sum().backward()


def resumed_run(tmp_path, batches, make_model):
    """Trains make_model(7) with Adam + RelativeL2 on three batches, saves, trains on the rest; then
    make_model(8) (other initial values) loads the file and trains on the rest. Returns both models."""
    def trainer_of(seed):
        model = make_model(seed)
        return model, tcnn.FusedTrainer(model, {"otype": "RelativeL2"},
                                        {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99})

    model, trainer = trainer_of(7)
    for x, t in batches[:3]:
        trainer.step(x, t)
    trainer.save(tmp_path / "run.tfz")
    for x, t in batches[3:]:
        trainer.step(x, t)
    resumed_model, resumed = trainer_of(8)
    resumed.load(tmp_path / "run.tfz")
    for x, t in batches[3:]:
        resumed.step(x, t)
    return model, resumed_model


def test_a_checkpoint_resumes_the_same_trajectory(tmp_path):
    torch.manual_seed(5)
    batches = [(torch.rand(256, 2), torch.rand(256, 3)) for _ in range(6)]
    # The resumed run takes the file's parameters and Adam's moments: the same bits.
    model, resumed_model = resumed_run(tmp_path, batches,
                                       lambda seed: tcnn.NetworkWithInputEncoding(2, 3, GRID, FUSED, seed=seed))
    assert torch.equal(resumed_model.params, model.params)


def test_a_bad_checkpoint_changes_nothing(tmp_path):
    net = tcnn.Network(3, 2, MLP, seed=13)
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "Adam", "learning_rate": 1e-2})
    trainer.step(torch.rand(64, 3), torch.rand(64, 2))
    trainer.save(tmp_path / "a.tfz")
    other = tcnn.FusedTrainer(tcnn.Network(3, 2, MLP, seed=13), {"otype": "L2"}, {"otype": "SGD"})
    with pytest.raises(tinyfuse.Error, match="optimizer|config"):
        other.load(tmp_path / "a.tfz")
    data = (tmp_path / "a.tfz").read_bytes()
    (tmp_path / "cut.tfz").write_bytes(data[:len(data) // 2])
    before = net.params.detach().clone()
    with pytest.raises(tinyfuse.Error):
        trainer.load(tmp_path / "cut.tfz")
    with pytest.raises(tinyfuse.Error):
        trainer.load(tmp_path / "missing.tfz")
    assert torch.equal(net.params.detach(), before)
    trainer.load(tmp_path / "a.tfz")  # the good file still loads
    assert torch.equal(net.params.detach(), before)


def test_bad_arguments_are_clear_errors():
    net = tcnn.Network(3, 2, MLP, seed=11)
    with pytest.raises(TypeError, match="tinyfuse.tcnn module"):
        tcnn.FusedTrainer(torch.nn.Linear(3, 2), {"otype": "L2"}, {"otype": "SGD"})
    with pytest.raises(TypeError, match="config dict"):
        tcnn.FusedTrainer(net, "L2", {"otype": "SGD"})
    with pytest.raises(tinyfuse.ConfigError, match="otype"):
        tcnn.FusedTrainer(net, {"otype": "NoSuchLoss"}, {"otype": "SGD"})
    with pytest.raises(tinyfuse.ConfigError):
        tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "NoSuchOptimizer"})
    with pytest.raises(tinyfuse.UnsupportedError, match="FP32|float"):
        tcnn.FusedTrainer(tcnn.Network(3, 2, MLP).double(), {"otype": "L2"}, {"otype": "SGD"})
    trainer = tcnn.FusedTrainer(net, {"otype": "L2"}, {"otype": "SGD"})
    x, target = torch.rand(16, 3), torch.rand(16, 2)
    with pytest.raises(tinyfuse.ShapeError, match=r"x must have shape \(batch, 3\)"):
        trainer.step(torch.rand(16, 4), target)
    with pytest.raises(tinyfuse.ShapeError, match=r"target must have shape \(16, 2\)"):
        trainer.step(x, torch.rand(16, 3))
    with pytest.raises(tinyfuse.ShapeError, match=r"target must have shape \(16, 2\)"):
        trainer.step(x, torch.rand(15, 2))
    with pytest.raises(tinyfuse.ShapeError, match="positive multiple"):
        trainer.step(torch.rand(0, 3), torch.rand(0, 2))
    with pytest.raises(TypeError, match="torch.Tensors"):
        trainer.step(x.numpy(), target)
    with pytest.raises(tinyfuse.ShapeError, match="real"):
        trainer.step(x.to(torch.complex64), target)
    net.params = torch.nn.Parameter(torch.zeros(net.n_params + 1))
    with pytest.raises(tinyfuse.ShapeError, match="new FusedTrainer"):
        trainer.step(x, target)


@pytest.mark.skipif(not (tinyfuse.built_with_cuda and torch.cuda.is_available()), reason="skipped: no GPU")
def test_cuda_steps_match_autograd_and_the_cpu_trainer():
    torch.manual_seed(4)
    config = {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
              "n_hidden_layers": 2}
    lr = 0.05
    cpu = tcnn.Network(3, 2, config, seed=12)
    gpu = tcnn.Network(3, 2, config, seed=12).cuda()
    ref = tcnn.Network(3, 2, config, seed=12).cuda()  # the same steps through autograd and plain SGD
    # FP32 on the CPU; FP16 with loss scale 128 on the GPU (tinycudann's precision), where the
    # trainer takes the one-kernel step and autograd the module's separate passes.
    t_cpu = tcnn.FusedTrainer(cpu, {"otype": "L2"}, {"otype": "SGD", "learning_rate": lr})
    t_gpu = tcnn.FusedTrainer(gpu, {"otype": "L2"}, {"otype": "SGD", "learning_rate": lr})
    for step in range(5):
        x, target = torch.rand(512, 3), torch.rand(512, 2)
        l_cpu = t_cpu.step(x, target)
        l_gpu = t_gpu.step(x.cuda(), target.cuda())
        ref.params.grad = None
        loss = ((ref(x.cuda()).float() - target.cuda()) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            ref.params -= lr * ref.params.grad
        assert l_gpu == pytest.approx(loss.item(), rel=1e-3), step
        assert l_gpu == pytest.approx(l_cpu, rel=1e-2), step
    torch.testing.assert_close(gpu.params.detach(), ref.params.detach(), rtol=0, atol=5e-5)
    torch.testing.assert_close(gpu.params.detach().cpu(), cpu.params.detach(), rtol=0, atol=1e-3)
    assert not torch.equal(gpu.params.detach().cpu(), tcnn.Network(3, 2, config, seed=12).params.detach())
    with pytest.raises(tinyfuse.ShapeError, match="trainer runs on cuda"):
        t_gpu.step(x, target)


@pytest.mark.skipif(not (tinyfuse.built_with_cuda and torch.cuda.is_available()), reason="skipped: no GPU")
def test_cuda_checkpoint_resumes_the_run(tmp_path):
    torch.manual_seed(6)
    batches = [(torch.rand(1024, 2, device="cuda"), torch.rand(1024, 3, device="cuda")) for _ in range(6)]

    def make_model(seed):  # the grid's deterministic sums: the same steps give the same bits
        return tcnn.NetworkWithInputEncoding(2, 3, {**GRID, "deterministic": True}, FUSED, seed=seed).cuda()

    model, resumed_model = resumed_run(tmp_path, batches, make_model)
    assert torch.equal(resumed_model.params, model.params)
    assert not torch.equal(resumed_model.params, make_model(8).params)
