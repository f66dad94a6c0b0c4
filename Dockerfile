# Builds the stencil manager image. Needs a Docker engine (make docker-build);
# nothing in the tests uses it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is the release tag the image is built at (make docker-build).
ARG VERSION=""
RUN CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -tags fieldsv1string -ldflags="-s -w -X github.com/stencil-operator/stencil/internal/cli.stampedVersion=${VERSION}" -o /out/stencil .

# Minimal base, no shell, non-root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stencil /stencil
USER 65532:65532
ENTRYPOINT ["/stencil"]
