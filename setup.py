"""`pip install --no-build-isolation .`: tilepipe as a Python distribution.

CMake builds the `tilepipe` binary and the `_tilepipe` module (Release, in build-pip/) and
installs them into a staging prefix laid out as site-packages: the packages `tilelang` and
`tilepipe` and the module at its root, the binary, its libraries and the chip configs under
`tilepipe_native/` (the binary and the module find the libraries and configs by their
relative paths, as in any installed prefix). The wheel takes that tree as it is; the
`tilepipe` command is a launcher of the packed binary (tilepipe/launcher.py)."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
NATIVE = "tilepipe_native"


class CMakeBuild(build_ext):
    def run(self):
        build = os.path.join(ROOT, "build-pip")
        stage = os.path.join(build, "stage")
        jobs = os.environ.get("TILEPIPE_JOBS", str(os.cpu_count() or 1))
        # with ccache (scripts/setup.sh), the objects of an earlier build of the checkout
        launch = [f"-DCMAKE_{lang}_COMPILER_LAUNCHER=ccache" for lang in ("C", "CXX")
                  ] if shutil.which("ccache") else []
        os.environ.setdefault("CCACHE_BASEDIR", ROOT)
        subprocess.check_call([
            "cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
            "-DTILEPIPE_BENCH=OFF", f"-DCMAKE_INSTALL_PREFIX={stage}",
            "-DTILEPIPE_INSTALL_PYTHONDIR=.", f"-DCMAKE_INSTALL_LIBDIR={NATIVE}/lib",
            f"-DCMAKE_INSTALL_BINDIR={NATIVE}/bin", f"-DCMAKE_INSTALL_DATADIR={NATIVE}/share",
            f"-DCMAKE_INSTALL_INCLUDEDIR={NATIVE}/include", *launch])
        subprocess.check_call(["cmake", "--build", build, "-j", jobs, "--target", "tilepipe_cli",
                               "_tilepipe"])
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", build], stdout=subprocess.DEVNULL)
        shutil.rmtree(self.build_lib, ignore_errors=True)  # a rebuild: the new tree only
        shutil.copytree(stage, self.build_lib, symlinks=True)


os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)


class NativeDistribution(Distribution):
    """The module and the native tree are platform files: a platform wheel, never pure."""

    def has_ext_modules(self):
        return True


setup(
    name="tilepipe",
    version="0.1.0",
    description="Tile-level kernel language, compiler and cycle-approximate simulator for "
                "Ascend A2/A3 NPUs (runs TileLang-Ascend scripts)",
    packages=[],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["tilepipe=tilepipe.launcher:main"]},
    python_requires=">=3.11",
    zip_safe=False,
    distclass=NativeDistribution,
    # setuptools' own tree beside CMake's (build/ is the developers' build directory)
    options={"build": {"build_base": "build-pip/setuptools"},
             "egg_info": {"egg_base": "build-pip"}},
)
