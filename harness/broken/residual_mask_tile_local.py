"""BUGS.md class 2 / 10 (relation: the correction is never the draft just rejected, issue 33): the
point-mass residual zeroes the draft token with a tile-local index, as a tiled kernel that compares
``tl.arange(0, 64)`` instead of ``start + tl.arange(0, 64)`` with the draft id: token ``x % 64`` is
zeroed in its place, so a rejected draft ``x >= 64`` stays in the residual and can be emitted as its
own correction. Invisible when ``V <= 64`` (every request of the conditional-law suite).
Expected catcher: ``law_consequences``."""

from harness.implementations.torch_eager import TorchEagerKernel

TILE = 64


class ResidualMaskTileLocal(TorchEagerKernel):
    name = "broken.residual_mask_tile_local"

    def token_residual(self, pb, tau):
        if pb.k_max == 0 or not pb.point_mass:
            return super().token_residual(pb, tau)
        at = tau.clamp(max=pb.k_max - 1)
        w = pb.target[pb.rows, at].clone()
        w[pb.rows, pb.draft_ids[pb.rows, at] % TILE] = 0.0
        return w


kernel = ResidualMaskTileLocal()
