package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
)

// The membership of a member's cluster, which servers joining the cluster
// change through this member (clusterjoin.Members).

// HasData reports whether dir holds a member's data (a restart), as
// opposed to a member yet to start or join.
func HasData(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "member"))
	return err == nil
}

// AddLearner adds a learner with peerURL, to be named name, and returns
// its ID and the initial cluster it must start with.
func (s *Server) AddLearner(ctx context.Context, name, peerURL string) (clusterjoin.Member, error) {
	resp, err := s.client.MemberAddAsLearner(ctx, []string{peerURL})
	if errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrGRPCUnhealthy) {
		// etcd adds a member only once every member has been connected
		// for 5 s: right after another join, it has not.
		return clusterjoin.Member{}, fmt.Errorf("%w: %w", clusterjoin.ErrNotYet, err)
	} else if err != nil {
		return clusterjoin.Member{}, err
	}
	// As etcdctl member add prints it: a member that has not published
	// its name yet (one that joined moments ago) is listed without one;
	// etcd matches the members by their peer URLs.
	var initial []string
	for _, m := range resp.Members {
		memberName := m.Name
		if m.ID == resp.Member.ID {
			memberName = name
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, memberName+"="+u)
		}
	}
	return clusterjoin.Member{ID: resp.Member.ID, InitialCluster: strings.Join(initial, ",")}, nil
}

// Promote makes learner id a voting member.
func (s *Server) Promote(ctx context.Context, id uint64) error {
	_, err := s.client.MemberPromote(ctx, id)
	if errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || errors.Is(err, rpctypes.ErrGRPCLearnerNotReady) {
		return fmt.Errorf("%w: %w", clusterjoin.ErrNotYet, err)
	}
	return err
}

// Remove removes member id.
func (s *Server) Remove(ctx context.Context, id uint64) error {
	_, err := s.client.MemberRemove(ctx, id)
	return err
}

// ID is this member's ID.
func (s *Server) ID() uint64 { return uint64(s.etcd.Server.MemberID()) }

// AdvertisePeerURL makes peerURL this member's only peer URL in the
// cluster's membership, as a lone member started before it took peers
// (on its unix socket) must.
func (s *Server) AdvertisePeerURL(ctx context.Context, peerURL string) error {
	resp, err := s.client.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range resp.Members {
		if m.ID == s.ID() && !slices.Equal(m.PeerURLs, []string{peerURL}) {
			_, err := s.client.MemberUpdate(ctx, m.ID, []string{peerURL})
			return err
		}
	}
	return nil
}

// RemoveNamed removes the member named name, unless it is this one (a
// member removed leaves the cluster and stops): it reports whether a
// member of that name was there.
func (s *Server) RemoveNamed(ctx context.Context, name string) (bool, error) {
	resp, err := s.client.MemberList(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range resp.Members {
		if m.Name != name {
			continue
		}
		if m.ID == s.ID() {
			return false, fmt.Errorf("etcd member %s is this server's", name)
		}
		if _, err := s.client.MemberRemove(ctx, m.ID); err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// Name is this member's name.
func (s *Server) Name() string { return s.etcd.Config().Name }
