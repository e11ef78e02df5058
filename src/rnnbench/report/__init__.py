"""Reports read records only; they never import models or drivers."""
