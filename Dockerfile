# Builds the stencil manager image. Needs a Docker engine (make docker-build);
# nothing in the tests uses it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -tags fieldsv1string -ldflags="-s -w" -o /out/stencil .

# Minimal base, no shell, non-root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stencil /stencil
USER 65532:65532
ENTRYPOINT ["/stencil"]
