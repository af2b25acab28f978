"""Sharpness-aware minimisation around any base optimiser (Foret et al., ICLR 2021), as SAR uses it
(Niu et al., ICLR 2023, Eq. 4-5; docs/methods/sar.md).

One update is two passes::

    loss(θ).backward();            sam.first_step()    # ε̂ = ρ g / ‖g‖₂ (global norm), θ <- θ + ε̂
    loss(θ + ε̂).backward();        sam.second_step()   # θ <- θ (exact copy), base step with ∇L(θ + ε̂)
                                   # (= sam.step() without a closure, as OnlineAdapter.update calls it)

``adaptive=True`` scales the ascent per element by |θ| (ASAM); SAR uses the non-adaptive form.
:meth:`state_dict` / :meth:`load_state_dict` are the *base* optimiser's (e.g. AdamW moments, standard format), so an
adapter's reset snapshot restores it bit-exactly; a pending perturbation is transient and dropped by a load.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class SAM(torch.optim.Optimizer):
    """Two-pass SAM step around ``base`` (which owns the parameter groups, learning rate and state).

    Args:
        base: the base optimiser, already built on the parameters to adapt.
        rho: radius ρ of the ascent step (SAR: 0.05).
        adaptive: ASAM's element-wise scaling (SAR: false).
        eps: added to the gradient norm (1e-12 as in the reference implementations).
    """

    def __init__(self, base: torch.optim.Optimizer, rho: float = 0.05, adaptive: bool = False, eps: float = 1e-12):
        if rho < 0:
            raise ValueError(f"rho must be >= 0, got {rho}")
        params = [p for g in base.param_groups for p in g["params"]]
        super().__init__(params, {"rho": rho, "adaptive": adaptive})
        self.base = base
        self.param_groups = base.param_groups  # shared: learning-rate changes reach the base optimiser
        self.state = base.state  # shared: the base's moments, per parameter
        self.rho, self.adaptive, self.eps = float(rho), bool(adaptive), float(eps)
        self._origin: dict[torch.Tensor, torch.Tensor] = {}

    @property
    def perturbed(self) -> bool:
        return bool(self._origin)

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    @torch.no_grad()
    def grad_norm(self) -> torch.Tensor:
        """‖g‖₂ over all parameters with a gradient (‖|θ| ⊙ g‖₂ when adaptive)."""
        norms = [((p.abs() if self.adaptive else 1.0) * p.grad).norm(p=2) for p in self._params() if p.grad is not None]
        if not norms:
            return torch.zeros(())
        return torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))

    @property
    def found_inf(self) -> torch.Tensor | None:
        """The base optimiser's ``found_inf`` (fused AdamW told it leaves everything as it was)."""
        return getattr(self.base, "found_inf", None)

    @found_inf.setter
    def found_inf(self, value: torch.Tensor) -> None:
        self.base.found_inf = value

    @found_inf.deleter
    def found_inf(self) -> None:
        del self.base.found_inf

    @torch.no_grad()
    def first_step(self, zero_grad: bool = True) -> dict[torch.Tensor, torch.Tensor]:
        """θ <- θ + ε̂(θ) from the current gradients; returns the perturbation per parameter."""
        if self.perturbed:
            raise RuntimeError("first_step called twice without second_step/restore")
        scale = self.rho / (self.grad_norm() + self.eps)
        steps = {}
        for p in self._params():
            if p.grad is None:
                continue
            e = (p.pow(2) if self.adaptive else 1.0) * p.grad * scale.to(p)
            self._origin[p] = p.detach().clone()
            p.add_(e)
            steps[p] = e
        if zero_grad:
            self.zero_grad(set_to_none=True)
        return steps

    @torch.no_grad()
    def restore(self) -> None:
        """Back to θ (an exact copy) without stepping."""
        for p, origin in self._origin.items():
            p.copy_(origin)
        self._origin.clear()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = True) -> None:
        """θ <- θ, then the base optimiser's step with the gradients computed at θ + ε̂."""
        self.restore()
        self.base.step()
        if zero_grad:
            self.zero_grad(set_to_none=True)

    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Without a closure: :meth:`second_step` (after :meth:`first_step` and the backward at θ + ε̂, as the
        adapters' update loop calls it). The closure form: gradients at θ must be present; ``closure``
        re-evaluates and back-propagates the loss."""
        if closure is None:
            if not self.perturbed:
                raise RuntimeError("SAM.step without a closure needs first_step and a second backward before it")
            self.second_step(zero_grad=True)
            return None
        self.first_step(zero_grad=True)
        with torch.enable_grad():
            loss = closure()
        self.second_step()
        return loss

    def state_dict(self) -> dict:
        """The base optimiser's state dict (standard ``state`` / ``param_groups``; ρ is a constant)."""
        return self.base.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self._origin.clear()  # a pending perturbation is dropped: the caller restores the parameters itself
        self.base.load_state_dict(state_dict)
        self.param_groups, self.state = self.base.param_groups, self.base.state
