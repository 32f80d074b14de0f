"""dmlbook: the companion package of the deep metric learning book."""

from .notebook import setup
from .profile import Profile, current_profile
from .reproducibility import seed_everything

__version__ = "0.1.0"

__all__ = ["setup", "Profile", "current_profile", "seed_everything", "__version__"]
