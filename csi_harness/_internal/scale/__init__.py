"""Scale experiments on the local provider: KEP-1472's burst with capacity tracking
on and off, StorageCapacityScoring's spread, and what simulated nodes cost
(``csi-harness scale``, docs/scale.md)."""
