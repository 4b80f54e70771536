# The csi-mock driver image. deploy/kubernetes/ runs it as csi-mock.local/csi-mock:dev:
#
#   docker build -t csi-mock.local/csi-mock:dev .
#
# BASE_IMAGE is any Debian-like image with Python >= 3.11 and its venv module. On a
# machine without a registry, pass a locally built base instead of python:3.11-slim,
# e.g. a debootstrapped Debian rootfs imported into Docker (Debian 12 has Python 3.11):
#
#   sudo debootstrap --variant=minbase --include=python3,python3-venv bookworm /tmp/rootfs
#   sudo tar -C /tmp/rootfs -c . | docker import \
#       --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
#       - csi-mock.local/python-base:bookworm
#   docker build --build-arg BASE_IMAGE=csi-mock.local/python-base:bookworm \
#       -t csi-mock.local/csi-mock:dev .
#
# The build installs csi-mock's dependencies from PyPI; --build-arg PIP_INDEX_URL=...
# points it at a mirror.
#
# The image runs as root on purpose: the node service bind-mounts volumes (mount(2)) into
# the kubelet's directories, which needs a privileged container and root.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG PIP_INDEX_URL=https://pypi.org/simple
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# A virtual environment behaves the same on python:*-slim and on Debian's own python3,
# whose system interpreter refuses `pip install` (PEP 668, externally managed).
RUN python3 -m venv /opt/csi-mock
ENV PATH=/opt/csi-mock/bin:$PATH

# The build context holds only these (.dockerignore is an allowlist): the driver, not
# the conformance harness, whose dependencies are an extra (csi-mock[harness]) the image
# does not install.
COPY pyproject.toml /src/
COPY csi_mock /src/csi_mock
RUN pip install /src && rm -rf /src

WORKDIR /
ENTRYPOINT ["csi-mock"]
CMD ["serve"]
