# The image deploy/chart/ runs (`federation`, `federation-agent`, `fedctl`): `make image`
# builds it as federation:<version>, the chart's default image.repository:appVersion.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY federation ./federation
COPY agents ./agents
COPY migrations ./migrations
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir /wheels/*.whl
# 65532: the non-root user the chart's securityContext runs as (runAsNonRoot).
USER 65532:65532
ENTRYPOINT []
CMD ["federation", "--help"]
