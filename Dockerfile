# Container images for flock. Build one target per binary:
#   docker build --target peer-finder -t ghcr.io/flockd/peer-finder:dev .
#   docker build --target flock-controller -t flock-controller:dev .
# (No Docker engine runs on the development machines; CI builds the binaries
# with `make build`, and these images are for clusters.)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/peer-finder ./cmd/flock-controller

# peer-finder runs as an init container, a sidecar, or pid 1 (`-- CMD`), so
# the image keeps a shell for on-start/on-change scripts.
FROM busybox:1.37 AS peer-finder
COPY --from=build /out/peer-finder /peer-finder
ENTRYPOINT ["/peer-finder"]

FROM gcr.io/distroless/static:nonroot AS flock-controller
COPY --from=build /out/flock-controller /flock-controller
USER 65532:65532
ENTRYPOINT ["/flock-controller"]
